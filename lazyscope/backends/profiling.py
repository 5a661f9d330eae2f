"""The profile window of ``lazyscope trace --profile [--profile-steps A:B]``.

A :class:`ProfileWindow` starts the backend's profiler (XProf via ``torch_xla.debug.profiler``
``start_trace``/``stop_trace`` on XLA) at the step boundary before step ``A`` and stops it at the
boundary after step ``B - 1`` (``A:B`` is half-open, like a Python slice), so the capture holds
whole steps: the ``xp.StepTrace`` of each step and the ``xp.Trace`` regions inside it
(forward, backward, optimizer). The profile lands in ``RUN/tensorboard/plugins/profile/<time>/``,
where TensorBoard's profile plugin finds it. A step's barrier runs inside its ``StepTrace``, so
the capture stops in the barrier of step ``B`` (the step after the window), which keeps step
``B - 1`` whole.

Step boundaries come from the :class:`~lazyscope.backends.base.Recorder`'s ``step_hooks``; the
window is also given the boundary before step 0 when it is attached, and is closed when the
trace ends (a run shorter than ``B`` steps still gets its profile).

Inside the window each step is annotated as a step through the backend's ``profile_step``
(opened at the boundary before it, closed at the one after it, the last one closed before the
capture stops): XProf's overview and input-pipeline pages need one root event per step, which
a program's ``xp.StepTrace`` makes and a loop of bare ``torch_xla.sync()`` / ``xm.mark_step()``
barriers does not (see docs/profiles.md).

A profiler that fails never fails the traced program: the error is kept in ``error`` and ends up
in ``meta.json`` ``info.profile``. This module imports no torch_xla; the backend does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyscope.core.errors import UsageError
from lazyscope.core.numbers import BadNumber, parse_int
from lazyscope.store.layout import TENSORBOARD_DIR

DEFAULT_STEPS = (2, 5)


def parse_profile_steps(text: str) -> tuple[int, int]:
    """``"A:B"`` -> ``(A, B)`` with ``0 <= A < B``; UsageError otherwise."""
    parts = text.split(":")
    if len(parts) != 2:
        raise UsageError(f"--profile-steps must look like A:B (e.g. 2:5), got {text!r}")
    try:
        first, last = (parse_int(p) for p in parts)
    except BadNumber as err:
        raise UsageError(f"--profile-steps must be two whole numbers A:B: {err}") from None
    if first < 0 or last <= first:
        raise UsageError(f"--profile-steps A:B needs 0 <= A < B, got {text!r}")
    return first, last


def default_steps(steps: int | None) -> tuple[int, int]:
    """The window when only ``--profile`` is given: steps 2-4 (after warm-up), or all the steps
    of a run shorter than that."""
    first, last = DEFAULT_STEPS
    if steps is not None and steps <= first:
        return 0, steps
    return first, last


@dataclass
class ProfileWindow:
    """Captures a profile of steps ``first`` .. ``last - 1`` into ``logdir``."""

    logdir: Path
    first: int = DEFAULT_STEPS[0]
    last: int = DEFAULT_STEPS[1]
    started_at_step: int | None = None
    stopped_at_step: int | None = None
    error: str | None = None
    #: marking steps failed (the capture goes on without step annotations)
    mark_error: str | None = None
    _backend: Any = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.started_at_step is not None and self.stopped_at_step is None

    def attach(self, backend: Any, recorder: Any) -> None:
        """Hook into ``recorder``'s step boundaries; the next step is ``recorder.next_index``.
        ``logdir`` (``RUN/tensorboard``) is reached through the run's own handle on its
        directory (a program that changes its working directory does not move the profile)."""
        self._backend = backend
        io_path = getattr(recorder.writer, "io_path", None)
        if io_path is not None:
            self.logdir = Path(io_path()) / self.logdir.name
        self.logdir.mkdir(parents=True, exist_ok=True)
        recorder.step_hooks.append(self.on_boundary)
        self.on_boundary(recorder.next_index)

    def on_boundary(self, next_index: int) -> None:
        """Called between steps: start before ``first``, stop once ``last`` steps are done."""
        if self.error is not None or self._backend is None:
            return
        if self.started_at_step is None and self.first <= next_index < self.last:
            try:
                self._backend.start_profile(self.logdir)
                self.started_at_step = next_index
            except Exception as err:  # noqa: BLE001 - a profiler never fails the program
                self.error = f"could not start the profiler: {type(err).__name__}: {err}"
                return
            self._mark(next_index)
        elif self.active and next_index > self.last:
            # This boundary is the barrier of step ``last``, called inside that step's
            # StepTrace: steps first .. last-1 are complete in the capture.
            self._stop(self.last)
        elif self.active:
            self._mark(next_index if next_index < self.last else None)

    def _mark(self, index: int | None) -> None:
        if self.mark_error is not None:
            return
        try:
            self._backend.profile_step(index)
        except Exception as err:  # noqa: BLE001 - a profiler never fails the program
            self.mark_error = (f"could not mark step {index} in the profile: "
                               f"{type(err).__name__}: {err}")

    def close(self, next_index: int) -> None:
        """End of the trace: stop a capture still running."""
        if self.active:
            self._stop(next_index)

    def _stop(self, end_step: int) -> None:
        self._mark(None)  # a step annotation still open ends before the capture does
        try:
            self._backend.stop_profile()
        except Exception as err:  # noqa: BLE001 - a profiler never fails the program
            self.error = f"could not stop the profiler: {type(err).__name__}: {err}"
        self.stopped_at_step = end_step

    def info(self) -> dict[str, Any]:
        """What ``meta.json`` ``info.profile`` records about the capture."""
        captured = None
        if self.started_at_step is not None and self.stopped_at_step is not None:
            captured = [self.started_at_step, self.stopped_at_step]
        info: dict[str, Any] = {
            "logdir": TENSORBOARD_DIR,
            "requested_steps": [self.first, self.last],
            "captured_steps": captured,
        }
        if self.mark_error:
            info["mark_error"] = self.mark_error
        if self.error:
            info["error"] = self.error
        elif captured is None:
            info["error"] = f"the run ended before step {self.first}: nothing was profiled"
        return info
