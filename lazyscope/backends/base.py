"""The backend contract and the recorder that every backend reports to.

A backend has two faces:

* a *runtime* that scenarios use so the same workload runs on every backend: ``device()``,
  ``barrier()``, ``step(i)`` (a region around one step that ends at a step barrier),
  ``region(name)`` (a profiler annotation) and ``prepare_model(model)``;
* a *collector* that turns what the backend's own instrumentation says into
  :class:`~lazyscope.model.Step` and :class:`~lazyscope.model.Event` records:
  ``prepare_env(run_dir)`` (before the backend's heavy imports), ``start(recorder)`` and
  ``stop()``.

The :class:`Recorder` is the one object a collector talks to. It writes each step the moment it
ends, merges what the traced program says about the step (:func:`annotate_step`), and stops a
script after ``max_steps`` barriers by raising :class:`StepLimitReached`.

Only this package imports torch_xla or torch internals; this module imports neither.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from lazyscope.model import Event, RunWriter, Step


class StepLimitReached(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised at a step barrier once ``--steps`` steps are recorded; ends the traced program.

    It derives from BaseException so a program's ``except Exception`` does not swallow it.
    """


class Recorder:
    """Receives steps and events from a collector and writes them to the run directory."""

    def __init__(self, writer: RunWriter | None, max_steps: int | None = None):
        self.writer = writer
        self.max_steps = max_steps
        self.steps: list[Step] = []
        self.events: list[Event] = []
        self.tail: Step | None = None
        self._extra: dict[str, Any] = {}
        self.t0 = time.perf_counter()
        #: called with the index of the next step after each step is recorded (profile window)
        self.step_hooks: list[Callable[[int], None]] = []

    @property
    def next_index(self) -> int:
        """Index of the step now in progress."""
        return len(self.steps)

    def annotate(self, **extra: Any) -> None:
        """Attach values (tokens, batch shape ...) to the step now in progress."""
        self._extra.update(extra)

    def set_info(self, **info: Any) -> None:
        """Attach values that describe the whole run (``meta.json`` ``info``)."""
        if self.writer is not None:
            self.writer.meta.info.update(info)
            self.writer.write_meta()

    def event(self, event: Event) -> None:
        self.events.append(event)
        if self.writer is not None:
            self.writer.write_event(event)

    def step(self, step: Step, *, enforce_limit: bool = True) -> None:
        """Record a finished step; raise StepLimitReached once the limit is reached."""
        step.index = self.next_index
        step.extra = {**self._extra, **step.extra}
        self._extra = {}
        self.steps.append(step)
        if self.writer is not None:
            self.writer.write_step(step)
        for hook in self.step_hooks:
            hook(self.next_index)
        if enforce_limit and self.max_steps is not None and len(self.steps) >= self.max_steps:
            raise StepLimitReached()

    def finish_tail(self, step: Step) -> None:
        """Record work done after the last barrier, if there was any."""
        step.kind = "tail"
        step.index = self.next_index
        step.extra = {**self._extra, **step.extra}
        self._extra = {}
        self.tail = step
        if self.writer is not None:
            self.writer.write_step(step)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


_ACTIVE: Recorder | None = None


def active_recorder() -> Recorder | None:
    """The recorder of the trace in progress in this process, if any."""
    return _ACTIVE


def set_active_recorder(recorder: Recorder | None) -> None:
    global _ACTIVE
    _ACTIVE = recorder


def annotate_step(**extra: Any) -> None:
    """Attach values to the current step of the active trace; a no-op when not traced.

    Scenarios call this with e.g. ``real_tokens=``, ``computed_tokens=``, ``seq_len=``.
    """
    if _ACTIVE is not None:
        _ACTIVE.annotate(**extra)


def set_run_info(**info: Any) -> None:
    """Attach run-wide values to the active trace's ``meta.json``; a no-op when not traced."""
    if _ACTIVE is not None:
        _ACTIVE.set_info(**info)


class Backend:
    """Base class: the runtime face and the collector face of one backend."""

    name = "base"
    #: extra needed, shown in "not installed" messages
    install_hint = ""

    # -- availability and environment -------------------------------------------------
    def check_available(self) -> None:
        """Raise MissingDependencyError with an install hint when the backend cannot run."""

    def prepare_env(self, run_dir: Any | None) -> None:
        """Set environment variables that must exist before the backend's heavy imports."""

    def describe(self) -> tuple[str, dict[str, str]]:
        """Return ``(device description, {package: version})``."""
        return "", {}

    # -- runtime for scenarios ----------------------------------------------------------
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

    # -- collection ---------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        """Begin collecting into ``recorder``."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop collecting; record the tail (work after the last barrier)."""
        raise NotImplementedError

    # -- profiler window (``lazyscope trace --profile``) ----------------------------------
    #: True when start_profile/stop_profile capture a profile TensorBoard can show
    supports_profile = False

    def start_profile(self, logdir: Any) -> None:
        """Start capturing a profile into ``logdir`` (TensorBoard's log directory)."""
        raise NotImplementedError(f"the {self.name} backend cannot capture a profile")

    def stop_profile(self) -> None:
        """Stop the capture started by :meth:`start_profile` and write it out."""
        raise NotImplementedError(f"the {self.name} backend cannot capture a profile")
