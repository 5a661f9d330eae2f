"""Which ``torch_xla.sync()`` calls are the program's step barriers, and what made XLA compile.

torch_xla calls ``sync`` for the program (``xm.mark_step``, ``xp.StepTrace``'s exit, the
parallel loader's per-batch barrier, the end of ``torch_xla.step()`` / a ``torch_xla.compile``d
call) and for itself (``torch_xla.compile`` flushing what was pending *before* its region, the
dynamo bridge preparing a graph's inputs). Only the first kind ends a step. The library frames
between the ``sync`` call and the user's code tell which (torch_xla 2.9's call chains, read from
its source: ``torch_xla/torch_xla.py``, ``core/xla_model.py``, ``debug/profiler.py``,
``distributed/parallel_loader.py``, ``_dynamo/dynamo_bridge.py``, ``utils/closures.py``).

The same frames name the cause of a compilation (its PT_XLA_DEBUG Python frames) and whether
the graph is torch_xla's own bookkeeping (``xm.mesh_reduce``, ``xm.rendezvous``, ``xm.save``,
the dynamo bridge): those are labelled, never reported as the program's recompilations.

Pure functions over :class:`~lazyscope.model.Frame` lists (innermost first); no torch import.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyscope.model import OWNER_LIBRARY, OWNER_USER, Frame

#: (file suffix, function) of torch_xla code whose sync ends the *program's* step
BARRIER_CALLERS = (
    ("core/xla_model.py", "mark_step"),
    ("debug/profiler.py", "__exit__"),
    ("distributed/parallel_loader.py", "next"),
    ("torch_xla/torch_xla.py", "_compile"),
    ("torch_xla/torch_xla.py", "sync"),
)
#: torch_xla code whose syncs and graphs are its own bookkeeping
INTERNAL_CALLERS = (
    ("torch_xla/torch_xla.py", "_clear_pending_ops_before_compile"),
    ("_dynamo/dynamo_bridge.py", ""),
    ("core/dynamo_bridge.py", ""),
)
#: torch_xla API functions whose graphs and reads are torch_xla's, made for the caller
LIBRARY_APIS = {
    "mesh_reduce": "xm.mesh_reduce",
    "rendezvous": "xm.rendezvous",
    "xla_rendezvous": "xm.rendezvous",
    "_maybe_convert_to_cpu": "a torch_xla transfer",
    "save": "xm.save",
    "broadcast_master_param": "xm.broadcast_master_param",
    "_run_step_closures": "",
}


def _norm(file: str) -> str:
    return file.replace("\\", "/")


def _matches(frame: Frame, table: Sequence[tuple[str, str]]) -> bool:
    file = _norm(frame.file)
    return any(file.endswith(suffix) and (not fn or frame.function == fn)
               for suffix, fn in table)


def _library_prefix(frames: Sequence[Frame]) -> list[Frame]:
    """The library frames before the first user frame (innermost first)."""
    out = []
    for f in frames:
        if not f.library:
            break
        out.append(f)
    return out


def is_program_barrier(callers: Sequence[Frame]) -> bool:
    """True when a ``torch_xla.sync`` whose callers are ``callers`` (innermost first, the
    ``sync`` frame itself excluded) ends a step of the user's program."""
    lib = _library_prefix(callers)
    if not lib:
        return True  # the user called torch_xla.sync() directly
    for frame in lib:
        if _matches(frame, INTERNAL_CALLERS):
            return False
        if frame.function in LIBRARY_APIS and "torch_xla" in _norm(frame.file):
            return False
    return _matches(lib[0], BARRIER_CALLERS) or all(
        "torch_xla" not in _norm(f.file) for f in lib)


def barrier_source(callers: Sequence[Frame]) -> str:
    """Which barrier a program barrier is (``callers`` as for :func:`is_program_barrier`):
    ``"loader"`` (the parallel loader's sync before each batch), ``"steptrace"`` (leaving an
    ``xp.StepTrace``), or ``"own"`` (``torch_xla.sync()``, ``xm.mark_step()``, the end of
    ``torch_xla.step()`` / a ``torch_xla.compile``d call)."""
    lib = _library_prefix(callers)
    if lib and _matches(lib[0], (("distributed/parallel_loader.py", "next"),)):
        return "loader"
    if lib and _matches(lib[0], (("debug/profiler.py", "__exit__"),)):
        return "steptrace"
    return "own"


def closure_kind(frames: Sequence[Frame]) -> str:
    """``"sync"`` when the frames run inside torch_xla's step closures (after the barrier),
    ``"async"`` inside its async closure thread, else ``""``."""
    for f in frames:
        file = _norm(f.file)
        if file.endswith("utils/closures.py"):
            return "async"
        if file.endswith("core/xla_model.py") and f.function == "_run_step_closures":
            return "sync"
    return ""


def library_caller(frames: Sequence[Frame]) -> Frame | None:
    """The library frame that called the torch_xla API of :func:`library_call`, when library
    code (Trainer's logging), not the user's, called it; None otherwise."""
    prefix = _library_prefix(frames)
    for i in range(len(prefix) - 1, -1, -1):
        f = prefix[i]
        if "torch_xla" in _norm(f.file) and f.function in LIBRARY_APIS:
            caller = prefix[i + 1] if i + 1 < len(prefix) else None
            return caller if caller is not None and "torch_xla" not in _norm(caller.file) \
                else None
    return None


def library_call(frames: Sequence[Frame]) -> str:
    """The torch_xla API that made a read or a graph for its own purposes (``xm.mesh_reduce``),
    or ``""`` when the user's code made it: the API the user called (the outermost one:
    ``xm.mesh_reduce``, not the ``xm.rendezvous`` it calls)."""
    for f in reversed(_library_prefix(frames)):
        if "torch_xla" in _norm(f.file) and f.function in LIBRARY_APIS:
            return LIBRARY_APIS[f.function] or f.function
    return ""


def classify_compile(frames: Sequence[Frame]) -> tuple[str, str, str]:
    """``(cause_kind, cause, owner)`` of a compilation from its Python frames (innermost
    first; PT_XLA_DEBUG's "Python Frame Triggered Execution")."""
    if not frames:
        return "other", "unknown (no Python frame)", OWNER_USER
    lib = _library_prefix(frames)
    api = library_call(frames)
    if api:
        return "internal", f"torch_xla internal: {api}", OWNER_LIBRARY
    if any(_matches(f, INTERNAL_CALLERS[1:]) for f in frames):
        # the openxla bridge compiles the graph dynamo traced from the user's code
        return "dynamo", "torch.compile (openxla): a graph dynamo traced", OWNER_USER
    if any(_matches(f, INTERNAL_CALLERS[:1]) for f in lib):
        return "internal", "torch_xla.compile: flushing work pending before the region", \
            OWNER_USER
    for i, f in enumerate(lib):
        if _norm(f.file).endswith("torch_xla/torch_xla.py") and f.function == "sync":
            caller = lib[i + 1] if i + 1 < len(lib) else None
            if caller is None:
                return "barrier", "step barrier: torch_xla.sync()", OWNER_USER
            if _matches(caller, (("debug/profiler.py", "__exit__"),)):
                return "barrier", "step barrier: exiting a profiler StepTrace region", OWNER_USER
            if _matches(caller, (("distributed/parallel_loader.py", ""),)):
                return "barrier", "step barrier: the parallel loader at step end", OWNER_USER
            if _matches(caller, (("core/xla_model.py", "mark_step"),)):
                return "barrier", "step barrier: xm.mark_step()", OWNER_USER
            if _matches(caller, (("torch_xla/torch_xla.py", "_compile"),)):
                return "barrier", "step barrier: the end of torch_xla.step() / " \
                                  "torch_xla.compile", OWNER_USER
            return "barrier", f"step barrier: torch_xla.sync() from {caller.function}", \
                OWNER_USER
    if closure_kind(frames):
        return "value_read", "a tensor value read in a step closure", OWNER_USER
    return ("value_read", "a tensor value was read by Python before the step barrier "
            "(.item(), print, if tensor, .tolist(), .cpu())", OWNER_USER)
