"""Tell the user's frames from library frames, and name the cause of a barrier.

Pure functions over :class:`~lazyscope.model.Site` lists; no torch import.
"""

from __future__ import annotations

import functools
import os
import sysconfig
from pathlib import Path

from lazyscope.model import Site

_LAZYSCOPE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_STDLIB_DIRS = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")}
    if p
)
_LIBRARY_PARTS = (
    f"{os.sep}torch_xla{os.sep}",
    f"{os.sep}torch{os.sep}",
    f"{os.sep}torchdynamo{os.sep}",
    f"{os.sep}click{os.sep}",
    f"{os.sep}_pytest{os.sep}",
    f"{os.sep}pluggy{os.sep}",
    # the @deprecated wrapper around xm.mark_step in torch_xla 2.9
    f"{os.sep}typing_extensions.py",
)


@functools.lru_cache(maxsize=4096)
def is_library_file(file: str) -> bool:
    """True for frames of torch, torch_xla, lazyscope itself and the standard library.

    Cached per file name: it resolves the path, and it runs for every frame walked at each
    value read and fallback call during a trace."""
    if not file or file.startswith("<"):
        return True
    try:
        resolved = str(Path(file).resolve())
    except OSError:
        resolved = file
    if resolved.startswith(_LAZYSCOPE_DIR):
        return True
    if any(resolved.startswith(d) for d in _STDLIB_DIRS) and "site-packages" not in resolved:
        return True
    return any(part in resolved for part in _LIBRARY_PARTS)


def user_site(frames: list[Site]) -> Site | None:
    """The innermost frame in the user's code (frames are listed innermost first)."""
    for frame in frames:
        if not is_library_file(frame.file):
            return frame
    return None


def _in(frame: Site, filename: str, *functions: str) -> bool:
    return frame.file.endswith(filename) and (not functions or frame.function in functions)


def classify_barrier(frames: list[Site]) -> tuple[str, str]:
    """Name what made torch_xla compile or execute, from the Python frames at that moment.

    Returns ``(kind, text)`` where kind is one of ``barrier`` (a step barrier: torch_xla.sync,
    xm.mark_step, a profiler StepTrace exit, the parallel loader), ``value_read`` (Python needed a
    tensor's value: ``.item()``, ``print``, ``if tensor``, ``.cpu()``), ``dynamo`` or ``other``.
    """
    if not frames:
        return "other", "unknown (no Python frame)"
    library = [f for f in frames if not f.file.startswith(_LAZYSCOPE_DIR)]
    if not library:
        return "other", "unknown"
    first = library[0]
    if _in(first, "torch_xla.py", "sync") or first.function == "mark_step":
        caller = library[1] if len(library) > 1 else None
        if caller is not None and _in(caller, "profiler.py", "__exit__"):
            return "barrier", "step barrier: exiting a profiler StepTrace region"
        if caller is not None and _in(caller, "parallel_loader.py"):
            return "barrier", "step barrier: the parallel loader at step end"
        if caller is not None and _in(caller, "xla_model.py", "mark_step"):
            return "barrier", "step barrier: xm.mark_step()"
        if caller is not None and _in(caller, "dynamo_bridge.py"):
            return "dynamo", "dynamo processing input graphs"
        if caller is not None and _in(caller, "torch_xla.py"):
            return "barrier", f"step barrier: torch_xla internal ({caller.function})"
        return "barrier", "step barrier: torch_xla.sync()"
    if any(_in(f, "dynamo_bridge.py") for f in library):
        return "dynamo", "dynamo compiling or executing a graph"
    return (
        "value_read",
        "a tensor value was read by Python before the step barrier "
        "(.item(), print, if tensor, .tolist(), .cpu())",
    )
