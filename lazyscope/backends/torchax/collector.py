"""The torchax backend: PyTorch modules on JAX arrays, compiled by ``jax.jit``.

What a step is: one call of the program's jitted step, or ``lazyscope.barrier()``.

* Until the program calls ``lazyscope.barrier()`` (a built-in scenario's ``runtime.step``
  does), a step ends with each call of its *step function*: the first jitted function of the
  user's (``interop.jax_jit``, ``JittableModule``, ``torchax.compile``, ``jax.jit``) to be called
  a second time, the callable a training loop calls every iteration. The jit objects made of one
  function count as one (a ``jax_jit(f)`` made anew in the loop). Until that second call the
  run is held back, then cut: step 0 ends at the step function's first call, step 1 at its
  second. At the end the report says which function was the step, with its calls, and names a
  jitted function called more often.
* From the first ``lazyscope.barrier()`` on, barriers end steps (what was held back is step 0),
  and a barrier waits for the outputs of the last jitted call (``jax.block_until_ready``: JAX
  dispatches asynchronously, so a step's time then covers its device work); jitted calls end no
  step.

Per step: wall time, JAX's compilations and their seconds (tracing + lowering + XLA's compile:
:mod:`~lazyscope.backends.torchax.compiles`), the jitted calls made (each runs one compiled
program: ``execute`` events by graph, :mod:`~lazyscope.backends.torchax.jit`) and the host reads
(``sync`` events at the user's line, priced at the time the host waited, from
:mod:`lazyscope.backends.xla.reads`' wrappers put on torchax's tensor class and on
``jax.device_get``, ``numpy.asarray`` and ``numpy.array`` of a JAX array).

A compilation is one of three:

* of a jitted function of the program (phase ``graph``): its graph id is the function and its
  arguments' signature, its inputs named in the user's words, its cause JAX's own cache-miss
  explanation in those words, its memory XLA's analysis of the executable;
* of an op the program ran eagerly (phase ``op``: eager torchax, a ``jnp`` call outside any jit),
  at the user's line;
* of a library's own (a PRNG seed, an optimizer's ``init``): counted, not a finding.

An ``OperatorNotFound`` (an op torchax has no lowering for) that ends the program is a
``fallback`` event at the user's line, which the report shows as a finding; the run keeps the
traceback in ``error.txt`` as for any failure.

Nothing here compiles, executes or transfers anything the program would not; torchax and jax are
imported in :meth:`TorchaxCollector.start` and the runtime's methods.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lazyscope.backends.base import Collector, Recorder, Runtime, TraceOptions, active
from lazyscope.backends.torchax.compiles import CompileWatch, RawCompile
from lazyscope.backends.torchax.explain import (
    CONTEXT,
    NEW_FUNCTION,
    TREE,
    TYPES,
    Miss,
    shaped,
    static_value,
    user_path,
)
from lazyscope.backends.torchax.jit import JitInfo, JitWatch
from lazyscope.backends.xla.reads import READ_METHODS as TORCH_READ_METHODS
from lazyscope.backends.xla.reads import ValueReadHooks
from lazyscope.core.errors import MissingDependencyError
from lazyscope.model import (
    OWNER_LIBRARY,
    Capabilities,
    Change,
    Compile,
    Execute,
    Fallback,
    FallbackExec,
    Stack,
    Sync,
)
from lazyscope.model.ownership import bound_stack, frames_from_summary

INSTALL_HINT = ("torchax is not installed: pip install 'lazyscope[torchax]' "
                "(torchax==0.0.13 with jax==0.10.2)")
STEP_FIELDS = ["wall_s", "t_end_s", "compile_count", "compile_s", "execute_count",
               "from_device_count", "from_device_s", "input_s", "barrier_s", "sync_s", "own_s"]
#: torchax.tensor.Tensor attribute -> how a read through it is named: torch.Tensor's reads, and
#: the ``__str__`` torchax defines (so ``print`` goes through it, not ``__repr__``)
READ_METHODS = {**TORCH_READ_METHODS, "__str__": "print(tensor) / str",
                "__repr__": "repr(tensor)"}


#: JAX programs that move data rather than compute (module name -> what they are)
TRANSFERS = {"jit(stage)": "JAX's copy of a host value to the device (compiled once per shape "
                           "and dtype)"}


def _jax_tensor(tensor: Any) -> bool:
    """A torchax tensor holding a concrete JAX array (not a tracer inside a jit)."""
    elem = getattr(tensor, "_elem", tensor)
    return hasattr(elem, "is_ready") and hasattr(elem, "addressable_shards")


def _not_ready(tensor: Any) -> bool | None:
    """True when the array was still being computed (the read waited for the device)."""
    elem = getattr(tensor, "_elem", tensor)
    try:
        return not bool(elem.is_ready())
    except Exception:  # noqa: BLE001 - deleted (donated) or not an array
        return None


@dataclass
class _Window:
    """What happened since the last step ended."""

    compiles: int = 0
    compile_s: float = 0.0
    calls: int = 0
    reads: int = 0
    read_s: float = 0.0
    executions: dict[str, int] = field(default_factory=dict)

    def values(self, wall: float, t_end: float) -> dict[str, float | None]:
        return {"wall_s": wall, "t_end_s": t_end, "compile_count": self.compiles,
                "compile_s": self.compile_s, "execute_count": self.calls,
                "from_device_count": self.reads, "from_device_s": self.read_s}

    def minus(self, other: _Window) -> _Window:
        return _Window(self.compiles - other.compiles, self.compile_s - other.compile_s,
                       self.calls - other.calls, self.reads - other.reads,
                       self.read_s - other.read_s)

    def copy(self) -> _Window:
        return _Window(self.compiles, self.compile_s, self.calls, self.reads, self.read_s,
                       dict(self.executions))


@dataclass
class _Mark:
    """A point in the held-back run: the end of a function's first call."""

    t: float
    events: int
    window: _Window


def overwritten_torchax() -> str | None:
    """One line when torchax's files are not torchax's own, else None.

    torch_xla 2.9.0's wheel ships an older copy of the ``torchax`` package (its ``checkpoint.py``
    imports flax, which neither declares). Whichever of the two pip unpacks last owns the shared
    files, so a fresh ``pip install 'lazyscope[xla,torchax]'`` can leave a torchax 0.0.13 whose
    ``import torchax`` fails on flax. The installed files are checked against torchax's own
    RECORD hashes (metadata only: nothing is imported)."""
    import base64
    import hashlib
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("torchax")
    except PackageNotFoundError:
        return None
    for name in ("torchax/__init__.py", "torchax/checkpoint.py"):
        entry = next((f for f in dist.files or () if str(f) == name), None)
        if entry is None or entry.hash is None or entry.hash.mode != "sha256":
            continue
        try:
            data = entry.locate().read_bytes()
        except OSError:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != entry.hash.value:
            return (f"torchax {dist.version}'s {name} was overwritten (torch_xla's wheel ships "
                    "an older torchax that imports flax): pip install --force-reinstall "
                    f"--no-deps torchax=={dist.version}")
    return None


# --------------------------------------------------------------------------- collector


class TorchaxCollector(Collector):
    """Collects a torchax program (see the module docstring)."""

    name = "torchax"
    install_hint = INSTALL_HINT

    def __init__(self, options: TraceOptions, *, worker_tracer: Any = None):
        super().__init__(options, worker_tracer=worker_tracer)
        self._recorder: Recorder | None = None
        self._jits = JitWatch(self._on_call)
        self._compiles = CompileWatch(self._on_compile)
        self._reads: ValueReadHooks | None = None
        self._patched: list[tuple[Any, str, Any]] = []
        #: "held" (no step function yet), "jit" (steps end at its calls), "barrier"
        self.mode = "held"
        self.step_label: str | None = None
        self._held: list[tuple[str, dict[str, Any]]] = []
        self._first_call: dict[str, _Mark] = {}
        self._calls: dict[str, int] = {}
        self._window = _Window()
        self._t_last = 0.0
        self._t0 = 0.0
        self._device_noted = False
        self._memory_used: list[int] = []
        self._memory_peak: int | None = None
        self._memory_limit: int | None = None
        self._memory_none = False
        self._labels_compiled: set[str] = set()
        self._jitted_calls = 0

    def capabilities(self) -> Capabilities:
        unmeasured = [
            "transfers to the device: not counted (torchax moves tensors with .to('jax') and "
            "jax.device_put, which JAX does not count)",
            "executions of ops run eagerly: not counted (each jitted call is one execution)",
        ]
        if not self._compiles.memory_measured and self._recorder is not None:
            unmeasured.append("each graph's memory: this jax has no compile_or_get_cached")
        return Capabilities(step_fields=list(STEP_FIELDS), lazy=False,
                            events=["compile", "sync", "execute", "fallback", "fallback_exec"],
                            unmeasured=unmeasured)

    def check_available(self) -> None:
        if importlib.util.find_spec("torchax") is None or importlib.util.find_spec("jax") is None:
            raise MissingDependencyError(INSTALL_HINT)
        overwritten = overwritten_torchax()
        if overwritten:
            raise MissingDependencyError(overwritten)

    def describe(self) -> tuple[str, dict[str, str]]:
        """Versions only: JAX's backend is the program's to start (a multi-host program calls
        ``jax.distributed.initialize()`` first); the device is recorded at the first step."""
        from importlib.metadata import PackageNotFoundError, version

        versions: dict[str, str] = {}
        for package in ("torch", "torchax", "jax", "jaxlib"):
            try:
                versions[package] = version(package)
            except PackageNotFoundError:
                if package in ("torchax", "jax"):
                    raise MissingDependencyError(INSTALL_HINT) from None
        platforms = os.environ.get("JAX_PLATFORMS", "")
        return f"jax ({platforms})" if platforms else "jax", versions

    # -- collection ---------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        import jax
        import numpy
        import torchax.tensor

        self._recorder = recorder
        self._t0 = self._t_last = time.perf_counter()
        self._compiles.install()
        self._jits.install()
        self._reads = ValueReadHooks(self._on_read, lambda: 0, cls=torchax.tensor.Tensor,
                                     methods=READ_METHODS, is_mine=_jax_tensor,
                                     pending=_not_ready)
        self._reads.install()
        for module, name, label in ((jax, "device_get", "jax.device_get"),
                                    (numpy, "asarray", "numpy.asarray"),
                                    (numpy, "array", "numpy.array")):
            original = getattr(module, name)
            self._patched.append((module, name, original))
            setattr(module, name, self._reads.wrap_function(original, label))
        if not self._compiles.memory_measured:
            recorder.meta.capabilities.unmeasured.append(
                "each graph's memory: this jax has no compile_or_get_cached to read it from")

    def stop(self) -> None:
        for module, name, original in reversed(self._patched):
            setattr(module, name, original)
        self._patched = []
        if self._reads is not None:
            self._reads.uninstall()
            self._reads = None
        self._jits.uninstall()
        self._compiles.uninstall()
        recorder = self._recorder
        if recorder is None:
            return
        self._wait()
        now = time.perf_counter()
        if self.mode == "held":
            # no step function and no barrier: everything is the tail of a run with no steps
            for kind, kw in self._held:
                recorder.event(kind, **kw)
            self._held = []
            recorder.note("no jitted function was called twice and no lazyscope.barrier() was "
                          "reached: no per-step timing (a step is a call of the program's jitted "
                          "step, or lazyscope.barrier()); compilations and host reads are still "
                          "reported at their lines")
        window = self._window
        if window.compiles or window.calls or window.reads:
            self._write_executions(window)
            recorder.finish_tail(window.values(now - self._t_last, now - recorder.t0))
        self._describe_steps(recorder)
        if not self._calls and not self._jitted_calls:
            # no jitted call at all: the program ran eagerly, op by op, and those executions
            # are not counted (0 would read as a run that did no work)
            fields = recorder.meta.capabilities.step_fields
            if "execute_count" in fields:
                fields.remove("execute_count")
            recorder.meta.capabilities.unmeasured.append(
                "executions: the program called no jitted function (it ran op by op, eagerly)")
        if self._memory_used:
            recorder.set_run_info(device_memory={
                "source": "jax Device.memory_stats", "used": self._memory_used,
                "peak": self._memory_peak, "limit": self._memory_limit})
        elif self._memory_none:
            recorder.set_run_info(device_memory={
                "unmeasured": "the runtime does not report device memory "
                              "(jax Device.memory_stats() is None on this platform)"})
        recorder.set_run_info(runtime_counts={"jax backend compiles": self._compiles.count})
        self._recorder = None

    def _describe_steps(self, recorder: Recorder) -> None:
        """Say what a step was (the report shows the run's notes)."""
        calls = self._calls
        if self.mode == "jit" and self.step_label is not None:
            n = calls.get(self.step_label, 0)
            text = (f"a step is one call of the jitted function {self.step_label}, the first "
                    f"the program called twice ({n} call{'s' if n != 1 else ''})")
            most = max(calls, key=lambda k: calls[k]) if calls else None
            if most is not None and most != self.step_label and calls[most] > n:
                text += (f"; {most} was called more ({calls[most]} calls): end each step with "
                         "lazyscope.barrier() to choose the step yourself")
            recorder.note(text)
        elif self.mode == "barrier":
            recorder.note("a step ends at each lazyscope.barrier() (which waits for the last "
                          "jitted call's outputs)")
        recorder.set_run_info(torchax_steps={"mode": self.mode, "function": self.step_label,
                                         "calls": dict(calls)})

    # -- events ---------------------------------------------------------------------------
    def _event(self, kind: str, **kw: Any) -> None:
        """An event of the step in progress (held back until the run is cut into steps)."""
        if self._recorder is None:
            return
        if self.mode == "held":
            self._held.append((kind, kw))
        else:
            self._recorder.event(kind, **kw)

    def _on_read(self, stack: Stack, payload: Sync, seconds: float, executions: int) -> None:
        self._window.reads += 1
        self._window.read_s += seconds
        self._event("sync", seconds=seconds, stack=stack, payload=payload, value=executions)

    def _on_compile(self, raw: RawCompile) -> None:
        if self._recorder is None:
            return
        self._window.compiles += 1
        self._window.compile_s += raw.seconds
        phases = {"trace": raw.trace_s, "lower": raw.lower_s, "compile": raw.compile_s}
        current = self._jits.current
        if current is not None:
            jitted, args, kwargs = current
            info: JitInfo = jitted._lazyscope_info
            if raw.module == f"jit({info.jax_name})":
                self._function_compile(raw, info, args, kwargs, phases)
                return
        if raw.owner == "op" and raw.module not in TRANSFERS:
            # an op run eagerly: JAX caches its program by shape, so the same op (graph id)
            # compiled again at a line met a new shape (lazyscope.analyze.recompiles, OPS)
            payload = Compile(phase="op", cause=f"{raw.module}: an op run eagerly",
                              cause_kind="eager_op", phases=phases)
            self._event("compile", seconds=raw.seconds, stack=raw.stack, payload=payload,
                        key=f"op:{raw.module}")
            return
        why = TRANSFERS.get(raw.module, "compiled by JAX or a library for its own use")
        payload = Compile(phase="graph", cause=f"{raw.module}: {why}", cause_kind="internal",
                          owner=OWNER_LIBRARY, function=raw.module, memory=raw.memory,
                          phases=phases)
        self._event("compile", seconds=raw.seconds, stack=raw.stack, payload=payload,
                    key=f"lib:{raw.module}#{self._compiles.count}")

    def _function_compile(self, raw: RawCompile, info: JitInfo, args: tuple[Any, ...],
                          kwargs: dict[str, Any], phases: dict[str, float]) -> None:
        graph = self._jits.graph_id(info, self._jits.signature(info, args, kwargs))
        self._jits.note_compile(graph)
        try:
            inputs = self._jits.graph_inputs(info, args, kwargs)
        except Exception:  # noqa: BLE001 - descriptive only
            inputs = None
        miss = raw.misses[-1] if raw.misses else None
        kind, cause, changes = explain_compile(info, miss, info.label in self._labels_compiled)
        self._labels_compiled.add(info.label)
        payload = Compile(phase="graph", cause=cause, cause_kind=kind,
                          owner="user" if info.user else OWNER_LIBRARY, function=info.label,
                          inputs=inputs, num_inputs=len(inputs) if inputs is not None else None,
                          memory=raw.memory, changes=changes or None, phases=phases)
        self._event("compile", seconds=raw.seconds, stack=raw.stack, payload=payload, key=graph)

    # -- steps ----------------------------------------------------------------------------
    def _on_call(self, info: JitInfo, graph: str, compiled: bool) -> None:
        recorder = self._recorder
        if recorder is None:
            return
        window = self._window
        window.calls += 1
        self._jitted_calls += 1
        if self.mode == "held":
            self._held.append(("execute", {"key": graph, "value": 1,
                                           "payload": Execute(cause="jitted call")}))
        else:
            window.executions[graph] = window.executions.get(graph, 0) + 1
        if not info.user:
            return
        label = info.label
        self._calls[label] = self._calls.get(label, 0) + 1
        if self.mode == "held":
            now = time.perf_counter()
            mark = self._first_call.get(label)
            if mark is None:
                self._first_call[label] = _Mark(now, len(self._held), window.copy())
                return
            self.mode, self.step_label = "jit", label
            self._cut(mark, now)
        elif self.mode == "jit" and label == self.step_label:
            self._end_step(time.perf_counter())

    def _cut(self, mark: _Mark, now: float) -> None:
        """The step function is known: the held-back run becomes steps 0 and 1."""
        recorder = self._recorder
        assert recorder is not None
        held, self._held = self._held, []
        first, rest = held[:mark.events], held[mark.events:]
        whole, self._window = self._window, _Window()
        for kind, kw in first:
            recorder.event(kind, **kw)
        t0 = self._t_last
        self._note_device()
        self._t_last = mark.t
        recorder.step(mark.window.values(mark.t - t0, mark.t - recorder.t0))
        for kind, kw in rest:
            recorder.event(kind, **kw)
        second = whole.minus(mark.window)
        self._t_last = now
        recorder.step(second.values(now - mark.t, now - recorder.t0))

    def _end_step(self, now: float, barrier_s: float = 0.0) -> None:
        """Record the step that ends ``now``; what follows here is lazyscope's own time, in
        the next step (``own_s``)."""
        recorder = self._recorder
        assert recorder is not None
        window, self._window = self._window, _Window()
        self._write_executions(window)
        self._note_device()
        wall, self._t_last = now - self._t_last, now
        values = window.values(wall, now - recorder.t0)
        values["barrier_s"] = barrier_s
        try:
            recorder.step(values)
        finally:
            recorder.add_time("own_s", time.perf_counter() - now)

    def _write_executions(self, window: _Window) -> None:
        assert self._recorder is not None
        for graph, n in window.executions.items():
            self._recorder.event("execute", key=graph, value=n,
                                 payload=Execute(cause="jitted call"))
        window.executions = {}

    def on_user_barrier(self) -> None:
        """``lazyscope.barrier()``: wait for the last jitted call's outputs, end the step."""
        recorder = self._recorder
        if recorder is None:
            return
        t0 = time.perf_counter()
        self._wait()
        now = time.perf_counter()
        if self.mode == "held":
            for kind, kw in self._held:
                if kind == "execute":
                    self._window.executions[kw["key"]] = \
                        self._window.executions.get(kw["key"], 0) + 1
                else:
                    recorder.event(kind, **kw)
            self._held = []
        self.mode = "barrier"
        self._end_step(now, now - t0)

    def _wait(self) -> None:
        out = self._jits.last_outputs()
        if out is None:
            return
        try:
            import jax

            from lazyscope.backends.torchax.jit import _jax_value

            jax.block_until_ready(jax.tree_util.tree_map(_jax_value, out))
        except Exception:  # noqa: BLE001 - outputs deleted (donated) or not arrays
            pass

    def _note_device(self) -> None:
        """The device once the program has started JAX's backend, and its memory now."""
        recorder = self._recorder
        if recorder is None:
            return
        try:
            import jax

            device = jax.devices()[0]
        except Exception:  # noqa: BLE001 - descriptive only
            return
        if not self._device_noted:
            self._device_noted = True
            n = jax.device_count()
            recorder.meta.device = f"jax ({device.platform}: {device.device_kind})" + (
                f", {n} devices" if n > 1 else "")
            recorder.set_run_info(devices=n)
        if self._memory_none:
            return
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 - not supported
            stats = None
        if not stats:
            self._memory_none = True
            return
        self._memory_used.append(int(stats.get("bytes_in_use", 0)))
        if "peak_bytes_in_use" in stats:
            self._memory_peak = int(stats["peak_bytes_in_use"])
        if "bytes_limit" in stats:
            self._memory_limit = int(stats["bytes_limit"])

    def on_program_error(self, exc: BaseException) -> None:
        """An op torchax has no lowering for ended the program: a ``fallback`` event at the
        user's line (the report's finding), with torchax's words."""
        seen: BaseException | None = exc
        while seen is not None and type(seen).__name__ != "OperatorNotFound":
            seen = seen.__cause__ or seen.__context__
        if seen is None or self._recorder is None:
            return
        import traceback

        frames = frames_from_summary(traceback.extract_tb(seen.__traceback__))
        op = missing_op(str(seen))
        if self.mode == "held":
            for kind, kw in self._held:
                self._recorder.event(kind, **kw)
            self._held = []
            self.mode = "ended"
        self._recorder.event("fallback_exec", payload=FallbackExec(op), value=1)
        self._recorder.event("fallback", stack=bound_stack(frames),
                             payload=Fallback(op=op), value=1)


def missing_op(message: str) -> str:
    """``Operator with name aten::foo has no lowering`` -> ``aten::foo``."""
    words = message.split()
    if "name" in words:
        i = words.index("name")
        if i + 1 < len(words):
            return words[i + 1]
    return message.strip()[:80] or "an op"


# --------------------------------------------------------------------------- causes


def explain_compile(info: JitInfo, miss: Miss | None,
                    compiled_before: bool) -> tuple[str, str, list[Change]]:
    """``(cause_kind, cause, changes)`` of a compilation of ``info``'s function, from JAX's
    explanation ``miss`` said in the user's names; ``compiled_before``: a jit object of the
    same function compiled before."""
    name = info.name
    if miss is None:
        return ("recompile", f"{name} compiled again", []) if compiled_before else \
            ("first", f"first call of {name}", [])
    if miss.kind == NEW_FUNCTION:
        if not compiled_before:
            return "first", f"first call of {name}", []
        created = next((f for f in info.created if not f.library), None)
        where = f" at {created.file}:{created.line}" if created is not None else ""
        text = (f"{name} was jitted again{where}: JAX never saw this function object, so it "
                "traced and compiled it anew")
        return "new_function", text, [Change(name, "guard", text=text)]
    changes: list[Change] = []
    parts: list[str] = []
    for item in miss.items:
        path = user_path(item.path, info.names, info.varargs)
        if miss.kind == TYPES:
            now, before = shaped(item.now), shaped(item.before)
            parts.append(f"{path}: {item.before} -> {item.now}")
            if now is None or before is None:
                changes.append(Change(path, "guard", text=f"{path}: {item.before} -> {item.now}"))
                continue
            if now[0] != before[0] or now[2] != before[2]:
                changes.append(Change(path, "dtype", None, _dtype_text(before), _dtype_text(now),
                                      text=f"JAX: {item.before} -> {item.now}"))
            if len(now[1]) != len(before[1]):
                changes.append(Change(path, "rank", None, before[1], now[1]))
            else:
                changes += [Change(path, "dim", d, a, b)
                            for d, (a, b) in enumerate(zip(before[1], now[1], strict=True))
                            if a != b]
        elif miss.kind == TREE:
            value_now, value_before = static_value(item.now), static_value(item.before)
            if value_now is not None and value_before is not None:
                parts.append(f"static {path}: {value_before} -> {value_now}")
                changes.append(Change(path, "value", None, value_before, value_now,
                                      text=f"static argument {path}: {value_before} -> "
                                           f"{value_now}"))
            else:
                parts.append(f"{path}: structure {item.why}")
                changes.append(Change(path, "count", None, item.before, item.now,
                                      text=f"{path}: {item.why}"))
        elif miss.kind == CONTEXT:
            parts.append(f"{item.path}: {item.before} -> {item.now}")
            changes.append(Change(item.path, "guard", None, item.before, item.now,
                                  text=f"JAX's tracing context: {item.path} {item.before} -> "
                                       f"{item.now}"))
    statics = miss.kind == TREE and all(c.what == "value" for c in changes) and changes
    what = "a static argument" if statics else {
        TYPES: "argument types", TREE: "argument structure", CONTEXT: "tracing context"}.get(
        miss.kind, miss.kind)
    cause = f"{name} recompiled: {what} changed" + (f" ({'; '.join(parts[:4])})" if parts
                                                       else "")
    return "recompile", cause, changes


def _dtype_text(parsed: tuple[str, list[int], bool | None]) -> str:
    dtype, _, weak = parsed
    return f"{dtype} (weak)" if weak else dtype


# --------------------------------------------------------------------------- runtime


class TorchaxRuntime(Runtime):
    """What a scenario runs on with ``--backend torchax``: torchax enabled globally, tensors on
    the ``jax`` device, and the step as one jitted function (:meth:`compiled_step`)."""

    name = "torchax"

    def __init__(self, device: str | None = None, dynamic: bool | None = None):
        self.model: Any = None

    def device(self) -> Any:
        import torch
        import torchax

        torchax.enable_globally()
        return torch.device("jax")

    def barrier(self) -> None:
        trace = active()
        if trace is not None:
            trace.collector.on_user_barrier()

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        import jax

        with jax.named_scope(name):
            yield

    def prepare_model(self, model: Any) -> Any:
        """The model as it is (its step is jitted by :meth:`compiled_step`)."""
        self.model = model
        return model

    def compiled_step(self, forward: Any, optimizer: Any) -> Any:
        """One jitted function for the whole step, ``step(x) -> loss``: the forward and loss
        (``forward(x)``), and with a torch ``optimizer`` the gradient and the update as optax
        does it (SGD or AdamW with the optimizer's learning rate), the parameters donated. The
        eager ``loss.backward()`` + ``optimizer.step()`` loop does not run on torchax 0.0.13."""
        import torch
        import torchax.train
        from torchax import interop

        model = self.model
        if model is None:
            raise RuntimeError("prepare_model(model) comes before compiled_step")
        params = {n: p for n, p in model.named_parameters()}
        buffers = dict(model.named_buffers())

        def loss_of(params: Any, buffers: Any, x: Any) -> Any:
            with torch.nn.utils.stateless._reparametrize_module(model, {**params, **buffers}):
                return forward(x)

        if optimizer is None:
            jitted = interop.jax_jit(loss_of)
            return lambda x: jitted(params, buffers, x)
        import optax

        lr = float(optimizer.param_groups[0]["lr"])
        tx = optax.adamw(lr) if isinstance(optimizer, torch.optim.AdamW) else optax.sgd(lr)
        step_fn = torchax.train.make_train_step(
            lambda w, b, x: loss_of(w, b, x), lambda out, _label: out, tx)
        state = {"params": params,
                 "opt": interop.call_jax(tx.init, params)}
        jitted = interop.jax_jit(step_fn, kwargs_for_jax_jit={"donate_argnums": (0, 2)})

        def step(x: Any) -> Any:
            loss, state["params"], state["opt"] = jitted(state["params"], buffers, state["opt"],
                                                         x, None)
            return loss

        return step
