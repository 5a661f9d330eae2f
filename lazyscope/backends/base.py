"""The backend contract: what collects, what a program runs on, and the recorder between them.

A backend has two separate faces:

* a :class:`Collector` turns what the backend's own instrumentation says into the run model
  (:mod:`lazyscope.model`): ``check_available``, ``prepare_env(run_dir)`` (before the backend's
  heavy imports), ``describe`` (device and versions, without starting any runtime),
  ``capabilities`` (what it measures), ``start(recorder)``, ``stop()``, and an optional profiler
  window;
* a :class:`Runtime` is what a scenario runs on so the same workload runs on every backend:
  ``device()``, ``barrier()``, ``step(i)`` (a region that ends at a step barrier),
  ``region(name)`` (a profiler annotation), ``prepare_model(model)`` and ``compiled_step``
  (the step as one compiled function, where the backend needs it).

Options reach a backend explicitly (:class:`TraceOptions`), never through attributes set from
outside. There is one active trace per process (:func:`active`): the public API
(``lazyscope.annotate_step``, ``lazyscope.note``, ``lazyscope.barrier``) talks to it, and a
collector that needs to see the program's barriers finds its recorder there.

A trace belongs to the process that started it. A child made by ``os.fork()`` (a
``DataLoader`` worker, a program's own fork) has no active trace, and every recorder it
inherited is dropped (:meth:`Recorder.forget`): it never writes, truncates or finalises its
parent's run, and its barriers are not its parent's steps.

The :class:`Recorder` is the one object a collector writes to. It writes each step the moment it
ends, merges what the traced program says about the step (annotations), and stops a script
after ``max_steps`` barriers by raising :class:`StepLimitReached`.

Only this package imports torch_xla or torch internals; this module imports neither.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyscope.core.errors import LazyscopeError, OutputError
from lazyscope.model import Capabilities, Stack
from lazyscope.model.info import info_fields
from lazyscope.model.steps import INTERVAL_FIELDS
from lazyscope.store import RunWriter


class StepLimitReached(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised at a step barrier once ``--steps`` steps are recorded; ends the traced program.

    It derives from BaseException so a program's ``except Exception`` does not swallow it.
    """


class TraceAborted(BaseException):  # noqa: N818 - a control-flow signal
    """Raised at a step barrier when lazyscope can no longer record (a full disk): ends the
    traced program, which cannot swallow it; ``error`` is the LazyscopeError to report."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


@dataclass
class TraceOptions:
    """How to trace: given once, to the collector's constructor."""

    backend: str = "xla"
    #: eager/compile: auto | cpu | cuda
    device: str = "auto"
    #: compile: torch.compile's dynamic= (None: torch's default)
    dynamic: bool | None = None
    #: xla: record each compiled graph's inputs from XLA's HLO dump (compile time only)
    graph_shapes: bool = True
    #: stop the program after this many barriers
    max_steps: int | None = None
    #: a fixed warm-up (compilations from this step on all count); None: found by the analysis
    warmup_steps: int | None = None


#: the backends each option applies to, with the value that says nothing (its default): a
#: trace refuses another value for another backend (it would be ignored, silently)
BACKEND_OPTIONS: dict[str, tuple[tuple[str, ...], object, str]] = {
    "device": (("eager", "compile"), "auto", "--device"),
    "dynamic": (("compile",), None, "--dynamic"),
    "graph_shapes": (("xla",), True, "--no-graph-shapes"),
}


def foreign_options(options: TraceOptions) -> list[str]:
    """One line for each option ``options`` sets that its backend does not use."""
    out = []
    for field, (backends, default, flag) in BACKEND_OPTIONS.items():
        value = getattr(options, field)
        if options.backend not in backends and value != default:
            shown = flag if field == "graph_shapes" else \
                f"{flag} {str(value).lower() if isinstance(value, bool) else value}"
            out.append(f"{shown} applies to the {' and '.join(backends)} backend"
                       f"{'s' if len(backends) > 1 else ''}, not to {options.backend} "
                       f"(--backend {backends[0]})")
    return out


_NO_TIME = dict.fromkeys(INTERVAL_FIELDS, 0.0)


def _with_intervals(values: dict[str, float | None],
                    intervals: dict[str, float]) -> dict[str, float | None]:
    """A step's values with the intervals added during it: 0 where none was, the sum where
    the collector gives one too."""
    out = {**_NO_TIME, **values}
    for key, seconds in intervals.items():
        given = out.get(key)
        out[key] = seconds + (given if given is not None and given == given else 0.0)
    return out


class Recorder:
    """Receives steps and events from a collector and writes them to the run directory.

    Thread-safe: a barrier or an event from another thread of the program is recorded under a
    lock (steps stay in order)."""

    def __init__(self, writer: RunWriter, max_steps: int | None = None):
        self.writer = writer
        self.max_steps = max_steps
        self.steps = 0
        #: the process this recorder belongs to; in a forked child it is forgotten
        self.owner_pid = os.getpid()
        self.forgotten = False
        #: the program caught the stop at the step limit and made more barriers (not recorded)
        self.past_limit = 0
        _RECORDERS.add(self)
        self._annotations: dict[str, Any] = {}
        self._lock = threading.RLock()
        self.t0 = time.perf_counter()
        #: called with the index of the next step after each step is recorded (profile window,
        #: progress display)
        self.step_hooks: list[Callable[[int], None]] = []
        #: compilations in the steps recorded so far, and the last step's wall time (what a
        #: progress display shows)
        self.compiles = 0
        self.last_wall_s: float | None = None
        #: the values of the last step recorded, and the events of each kind recorded in it
        #: (what an online rule looks at before it reads the run: lazyscope.guard, live alerts)
        self.last_values: dict[str, float | None] = {}
        self.last_events: dict[str, int] = {}
        self._events: dict[str, int] = {}
        #: once set (a full disk), nothing more is written; the trace ends with that error
        self.failed: BaseException | None = None
        #: the last graph compiled with its memory known: (stack, memory, step), what an
        #: out-of-memory error is reported against
        self.last_graph: tuple[Stack | None, Any, int] | None = None
        #: the step now in progress's measured time intervals (``input_s``, ``sync_s``,
        #: ``own_s`` ...: :data:`lazyscope.model.steps.INTERVAL_FIELDS`), on the program's step
        #: thread only: the main thread until the first step barrier, then the thread of the
        #: barriers (a loader's own thread does not wait for the step)
        self._intervals: dict[str, float] = {}
        self.step_thread = threading.main_thread().ident
        #: while a profile is captured: called with (kind, stack, step) for each event, to
        #: name it in the profile (:meth:`Collector.span`)
        self.marker: Callable[[str, Stack | None, int], None] | None = None

    @property
    def next_index(self) -> int:
        """Index of the step now in progress."""
        return self.steps

    @property
    def meta(self) -> Any:
        return self.writer.meta

    def forget(self) -> None:
        """A forked child: this recorder is the parent's; record nothing more, write nothing."""
        self.forgotten = True
        self.writer.forget()

    def intervals(self) -> dict[str, float]:
        """The step now in progress's intervals so far (a copy)."""
        with self._lock:
            return dict(self._intervals)

    def add_time(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to the step now in progress's interval ``name`` (``input_s``,
        ``sync_s``, ``own_s``, ``barrier_s``) when the caller is the program's step thread;
        from another thread it is not the step's wait, and is dropped."""
        if threading.get_ident() != self.step_thread or self.forgotten:
            return
        with self._lock:
            self._intervals[name] = self._intervals.get(name, 0.0) + seconds

    def annotate(self, **values: Any) -> None:
        """Attach values (tokens, batch shape ...) to the step now in progress."""
        if self.forgotten:
            return
        with self._lock:
            self._annotations.update(values)

    def set_run_info(self, **fields: Any) -> None:
        """Attach lazyscope's own run-wide values: each a field of
        :class:`~lazyscope.model.info.RunInfo` with its declared type (checked by
        :func:`~lazyscope.model.info.info_fields`)."""
        self.set_info(**info_fields(**fields))

    def set_info(self, **info: Any) -> None:
        """Attach values that describe the whole run (``meta.json`` ``info``): the program's own
        (``lazyscope.set_info``); lazyscope's go through :meth:`set_run_info`."""
        if self.forgotten:
            return
        with self._lock:
            self.writer.meta.info.update(info)
            self._write_meta()

    def add_to_info(self, key: str, values: Iterable[Any]) -> None:
        """Merge ``values`` into the sorted set of values ``meta.json`` ``info[key]`` holds (a
        read and a write under one lock, so two callers never lose each other's values)."""
        if self.forgotten:
            return
        with self._lock:
            info = self.writer.meta.info
            info.update(info_fields(**{key: sorted({*(info.get(key) or []), *values})}))
            self._write_meta()

    def note(self, text: str) -> None:
        """Add a line to the run's notes (shown by every report), once."""
        if self.forgotten:
            return
        with self._lock:
            notes = list(self.writer.meta.info.get("notes") or [])
            if text not in notes:
                notes.append(text)
                self.writer.meta.info["notes"] = notes
                self._write_meta()

    def keep_text(self, name: str, text: str) -> None:
        """Append ``text`` to the run's file ``name`` (evidence kept as the run goes: the XLA
        debug analyses)."""
        if self.failed is not None or self.forgotten:
            return
        with self._lock:
            try:
                self.writer.append_text(name, text)
            except Exception as err:  # noqa: BLE001 - OutputError: stop writing, keep the run
                self._fail(err)

    def _write_meta(self) -> None:
        try:
            self.writer.write_meta()
        except OSError as err:
            self._fail(err)

    def _fail(self, err: BaseException) -> None:
        """Stop recording with ``err`` (the trace ends with it): an OSError is the run
        directory's problem (exit 3), anything else a LazyscopeError saying what could not be
        recorded, never a raw exception out of lazyscope's internals."""
        if self.failed is not None:
            return
        if isinstance(err, OSError):
            self.failed = OutputError.from_os(err, self.writer.path, steps=self.steps)
        elif isinstance(err, LazyscopeError):
            self.failed = err
        else:
            self.failed = LazyscopeError(
                f"could not record step {self.steps}: {type(err).__name__}: {err}")

    def event(self, kind: str, *, seconds: float = 0.0, stack: Stack | None = None,
              payload: Any = None, key: str = "", value: float = 0.0,
              step: int | None = None) -> None:
        """Record an event (in the step now in progress unless ``step`` is given)."""
        if self.failed is not None or self.forgotten:
            return
        if kind == "compile" and getattr(payload, "memory", None) is not None:
            self.last_graph = (stack, payload.memory, self.steps if step is None else step)
        marker = self.marker
        if marker is not None:
            try:
                marker(kind, stack, self.steps if step is None else step)
            except Exception:  # noqa: BLE001 - a profile annotation never fails the program
                self.marker = None
        with self._lock:
            if step is None:
                self._events[kind] = self._events.get(kind, 0) + 1
                if kind == "sync" and seconds > 0 and \
                        threading.get_ident() == self.step_thread:
                    self._intervals["sync_s"] = self._intervals.get("sync_s", 0.0) + seconds
            try:
                self.writer.write_event(kind, self.steps if step is None else step,
                                        seconds=seconds, stack=stack, payload=payload, key=key,
                                        value=value)
            except Exception as err:  # noqa: BLE001 - OutputError: stop writing, keep the run
                self._fail(err)

    def step(self, values: dict[str, float | None], *, enforce_limit: bool = True) -> None:
        """Record a finished step; raise StepLimitReached once the limit is reached, or the
        writing error that stopped the run. Past the limit (the program caught the stop and
        went on) nothing is recorded and the stop is raised again at every barrier."""
        if self.forgotten:
            return
        if enforce_limit and self.max_steps is not None and self.steps >= self.max_steps:
            with self._lock:
                self.past_limit += 1
                self._annotations = {}
                self._intervals = {}
            raise StepLimitReached()
        with self._lock:
            if self.steps == 0:
                self.step_thread = threading.get_ident()
            # an interval nothing was added to is 0 (the backend's capabilities say whether
            # it is measured at all); one the collector also gives (the barrier it timed, after
            # a barrier merged into this step earlier) is the sum
            values = _with_intervals(values, self._intervals)
            self._intervals = {}
            if self.failed is None:
                try:
                    self.writer.write_step(self.steps, values, annotations=self._annotations)
                except Exception as err:  # noqa: BLE001 - OutputError
                    self._fail(err)
            self._annotations = {}
            if self.failed is not None:
                raise TraceAborted(self.failed)
            compiles, wall = values.get("compile_count"), values.get("wall_s")
            if compiles and compiles == compiles:  # None and NaN: not measured
                self.compiles += int(compiles)
            self.last_wall_s = wall if wall is not None and wall == wall else None
            self.last_values, self.last_events, self._events = values, self._events, {}
            self.steps += 1
            index = self.steps
        for hook in self.step_hooks:
            hook(index)
        if enforce_limit and self.max_steps is not None and index >= self.max_steps:
            raise StepLimitReached()

    def finish_tail(self, values: dict[str, float | None]) -> None:
        """Record work done after the last barrier."""
        with self._lock:
            if self.failed is not None or self.forgotten:
                return
            values = _with_intervals(values, self._intervals)
            self._intervals = {}
            try:
                self.writer.write_step(self.steps, values, tail=True,
                                       annotations=self._annotations)
            except Exception as err:  # noqa: BLE001
                self._fail(err)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


class Collector:
    """Base class of what collects (see the module docstring)."""

    name = "base"
    #: the extra needed, shown in "not installed" messages
    install_hint = ""
    #: True when start_profile/stop_profile capture a profile TensorBoard can show
    supports_profile = False
    #: a profile is being captured now (the step's intervals and lazyscope's events are named
    #: in it: :meth:`span`)
    profiling = False

    def __init__(self, options: TraceOptions, *, worker_tracer: Any = None):
        self.options = options
        #: what traces a worker process this collector starts (``xmp.spawn``): the runner's
        #: Tracer class, given by the tracer that owns this collector (picklable by reference)
        self.worker_tracer = worker_tracer
        #: for a program whose steps are known to a framework around it (a trainer's callback):
        #: asked at each of the program's own step barriers whether it ends a step; False: the
        #: barrier's work counts in the step that ends at the next one. None: every one does
        self.step_gate: Callable[[], bool] | None = None

    def capabilities(self) -> Capabilities:
        """What this backend measures (written to ``meta.json``)."""
        return Capabilities()

    def check_available(self) -> None:
        """Raise MissingDependencyError with an install hint when the backend cannot run."""

    def prepare_env(self, run_dir: Path) -> None:
        """Set environment variables that must exist before the backend's heavy imports."""

    def describe(self) -> tuple[str, dict[str, str]]:
        """``(device description, {package: version})``, without starting any runtime."""
        return "", {}

    def start(self, recorder: Recorder) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def start_profile(self, logdir: Path) -> None:
        raise NotImplementedError(f"the {self.name} backend cannot capture a profile")

    def stop_profile(self) -> None:
        raise NotImplementedError(f"the {self.name} backend cannot capture a profile")

    def span(self, name: str) -> Any:
        """A context manager that names what runs inside it in the profile being captured
        (XProf's trace viewer shows it beside the device's work); a no-op elsewhere. Callers
        ask only while :attr:`profiling`."""
        return contextlib.nullcontext()

    def profile_step(self, index: int | None) -> None:
        """While a profile is captured, at a step boundary: end the step annotation now open
        and open one for step ``index`` (None: open none), for profilers that need the
        program's steps marked (XProf's step-time views). A no-op where nothing is needed."""

    def on_user_barrier(self) -> None:
        """``lazyscope.barrier()`` was called by the program (backends without barriers of
        their own record a step here)."""

    def on_program_error(self, exc: BaseException) -> None:
        """The program ended with ``exc`` (before :meth:`stop`): a backend whose own errors are
        evidence (torchax's ``OperatorNotFound``: an op with no lowering) records them here."""


class Runtime:
    """Base class of what a scenario runs on (see the module docstring)."""

    name = "base"

    def device(self) -> Any:
        raise NotImplementedError

    def barrier(self) -> None:
        """End the step: launch (XLA) or wait for (CUDA) the pending work."""
        raise NotImplementedError

    @contextlib.contextmanager
    def step(self, index: int, name: str = "train_step") -> Iterator[None]:
        """A region around one step that ends at a step barrier."""
        yield
        self.barrier()

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        """A named profiler annotation (forward, backward, optimizer ...)."""
        yield

    def prepare_model(self, model: Any) -> Any:
        """Wrap a model the way this backend runs it (``torch.compile`` for example)."""
        return model

    def compiled_step(self, forward: Any, optimizer: Any) -> Any:
        """The whole step (``forward(x)`` gives the loss; with ``optimizer``, the backward and
        the update too) as one compiled function ``step(x) -> loss``, for a backend that runs
        training only that way (torchax); None: run the eager loop."""
        return None


@dataclass
class ActiveTrace:
    recorder: Recorder
    collector: Collector
    options: TraceOptions
    #: what the run's end will add to its info that the trace holds until then (the loader
    #: watch's evidence): a report of the run so far reads it
    info_so_far: Callable[[], dict[str, Any]] | None = None


_ACTIVE: ActiveTrace | None = None
#: every live recorder of this process (forgotten in a forked child)
_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()


def active() -> ActiveTrace | None:
    """The trace in progress in this process, if any."""
    return _ACTIVE


def set_active(trace: ActiveTrace | None) -> None:
    global _ACTIVE
    _ACTIVE = trace


def _after_fork_in_child() -> None:
    """A forked child has no trace of its own: its parent's recorders are forgotten."""
    global _ACTIVE
    _ACTIVE = None
    for recorder in list(_RECORDERS):
        with contextlib.suppress(Exception):
            recorder.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
