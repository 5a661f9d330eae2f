"""Plain PyTorch backends: ``eager`` and ``compile`` (``torch.compile`` with inductor).

Same run format and report as the XLA backend. What a step is, and how it is timed:

* The step barrier is the end of a scenario's ``backend.step(i)`` region, or a call to
  :func:`barrier` (``lazyscope.barrier()``) in a user's own script. On CUDA the barrier calls
  ``torch.cuda.synchronize()`` before reading the host clock, so ``wall_s`` (time between two
  barriers, ``time.perf_counter``) covers the GPU work of the step; on the CPU the work is
  already done when Python gets control back. Warm-up steps are excluded from medians by the
  analysis, as for XLA.
* Compilations (``compile`` events), backward compilations (``compile_backward``) and graph
  breaks (``graph_break``) come from :mod:`lazyscope.backends.dynamo` (structured sources).
* Host syncs (``sync`` events, with the user's line) come from
  ``torch.cuda.set_sync_debug_mode("warn")`` on CUDA: each warning is recorded with the Python
  stack at that moment and not printed. On the CPU there is no device to wait for: the run's
  ``meta.info["notes"]`` says so.
* ``Step.from_device_count`` counts those host syncs; execute and transfer counters stay 0
  (PyTorch has no per-step counters for them).

Collection never synchronises except at barriers on CUDA (which any correct step timer must
do). torch is imported lazily (in methods), so lazyscope imports where torch is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

from lazyscope.backends.base import Backend, Recorder
from lazyscope.backends.dynamo import DynamoCollector
from lazyscope.backends.frames import user_site
from lazyscope.errors import MissingDependencyError, UsageError
from lazyscope.model import Event, Site, Step

SYNC_WARNING = "called a synchronizing CUDA operation"
NO_CUDA_SYNC_NOTE = (
    "sync events: not collected on {device}: torch.cuda.set_sync_debug_mode needs a CUDA device"
)
DYNAMIC_CHOICES = {"auto": None, "true": True, "false": False}

#: the collecting backend of the trace in progress (a scenario's own backend object reports here)
_ACTIVE: TorchBackend | None = None


def resolve_device(choice: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is usable, else ``cpu``; ``cuda`` without one is a
    MissingDependencyError (exit 4) naming the reason."""
    import torch

    if choice in ("", "auto", None):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise MissingDependencyError(
            "--device cuda: no CUDA device is usable here (torch.cuda.is_available() is False); "
            "use --device cpu or auto"
        )
    if choice not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {choice!r}; choose auto, cpu or cuda")
    return choice


def barrier() -> None:
    """End a step of a program traced with ``--backend eager|compile``.

    Waits for the CUDA device (when CUDA is in use) and records the step in the active trace;
    outside a trace it only waits, so a script can call it unconditionally.
    """
    collector = _ACTIVE
    device = collector.device_name if collector is not None else None
    _synchronize(device)
    if collector is not None:
        collector.on_barrier()


def _synchronize(device: str | None) -> None:
    import torch

    if device == "cuda" or (device is None and torch.cuda.is_available()
                            and torch.cuda.is_initialized()):
        torch.cuda.synchronize()


class TorchBackend(Backend):
    """Plain PyTorch, eager. Subclassed by :class:`CompileBackend`."""

    name = "eager"
    install_hint = "pip install torch"

    def __init__(self) -> None:
        self.device_choice = "auto"
        self.dynamic: bool | None = None
        self.device_name: str | None = None
        self._recorder: Recorder | None = None
        self._dynamo: DynamoCollector | None = None
        self._t_last = 0.0
        self._pending_syncs: list[Event] = []
        self._sync_state: tuple[Any, Any] | None = None
        self._notes: list[str] = []
        self._published: set[str] = set()

    # -- configuration (scenario_kit.backend_from_args) ----------------------------------
    def configure(self, device: str = "auto", dynamic: str | bool | None = None) -> None:
        self.device_choice = device or "auto"
        if isinstance(dynamic, str):
            dynamic = DYNAMIC_CHOICES[dynamic]
        self.dynamic = dynamic

    # -- availability and environment -------------------------------------------------
    def check_available(self) -> None:
        if importlib.util.find_spec("torch") is None:
            raise MissingDependencyError("torch is not installed: pip install torch")

    def describe(self) -> tuple[str, dict[str, str]]:
        import torch

        versions = {"torch": torch.__version__}
        if torch.version.cuda:
            versions["cuda"] = str(torch.version.cuda)
        device = resolve_device(self.device_choice)
        if device == "cuda":
            return f"cuda ({torch.cuda.get_device_name()})", versions
        return "cpu", versions

    # -- runtime for scenarios ----------------------------------------------------------
    def device(self) -> Any:
        import torch

        self.device_name = resolve_device(self.device_choice)
        if _ACTIVE is not None and _ACTIVE is not self:
            _ACTIVE.note_device(self.device_name)
        return torch.device(self.device_name)

    def barrier(self) -> None:
        _synchronize(self.device_name)
        if _ACTIVE is not None:
            _ACTIVE.on_barrier()

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        import torch

        with torch.profiler.record_function(name):
            yield

    # -- collection ---------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        global _ACTIVE
        self._recorder = recorder
        self._dynamo = DynamoCollector()
        self._dynamo.start()
        self._notes = list(self._dynamo.notes)
        _ACTIVE = self
        self.note_device(resolve_device(self.device_choice))
        self._t_last = time.perf_counter()

    def note_device(self, device: str) -> None:
        """The device the program runs on: enables CUDA sync events, records notes."""
        self.device_name = device
        self._notes = [n for n in self._notes if not n.startswith("sync events: not collected")]
        if device == "cuda":
            self._install_sync_debug()
        else:
            self._notes.append(NO_CUDA_SYNC_NOTE.format(device=device))
        if self._recorder is not None and self._recorder.writer is not None:
            meta = self._recorder.writer.meta
            if not meta.device.startswith(device):
                meta.device = device
            self._recorder.set_info(notes=self._merged_notes(), torch_device=device)

    def _merged_notes(self) -> list[str]:
        """This backend's notes, then the notes the traced program added itself (a scenario's
        ``skipped: ...`` for example), which the backend never drops."""
        published = set(self._published)
        theirs: list[str] = []
        if self._recorder is not None and self._recorder.writer is not None:
            theirs = [n for n in self._recorder.writer.meta.info.get("notes") or []
                      if n not in published and n not in self._notes]
        self._published.update(self._notes)
        return [*self._notes, *theirs]

    def _add_note(self, note: str) -> None:
        if note not in self._notes:
            self._notes.append(note)
        if self._recorder is not None:
            self._recorder.set_info(notes=self._merged_notes())

    def _install_sync_debug(self) -> None:
        if self._sync_state is not None:
            return
        import torch

        if not hasattr(torch.cuda, "set_sync_debug_mode"):
            self._add_note("sync events: torch.cuda.set_sync_debug_mode is missing in this torch")
            return
        previous_mode = torch.cuda.get_sync_debug_mode()
        saved = self._capture_sync_warnings()
        torch.cuda.set_sync_debug_mode("warn")
        self._sync_state = (previous_mode, saved)

    def _capture_sync_warnings(self) -> Any:
        """Turn torch's sync-debug warnings into ``sync`` events (not printed) until the returned
        ``catch_warnings`` is exited; other warnings are shown as before."""
        saved = warnings.catch_warnings()  # restores filters and showwarning on exit
        saved.__enter__()
        previous_show = warnings.showwarning
        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}.*")

        def showwarning(message: Any, category: Any, filename: str, lineno: int,
                        file: Any = None, line: str | None = None) -> None:
            if SYNC_WARNING in str(message):
                self._record_sync(str(message))
                return
            previous_show(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        return saved

    def _record_sync(self, message: str) -> None:
        stack = traceback.extract_stack()[:-2]
        frames = [Site(f.filename, f.lineno or 0, f.name) for f in reversed(stack)]
        index = self._recorder.next_index if self._recorder is not None else -1
        self._pending_syncs.append(Event(kind="sync", step=index, site=user_site(frames),
                                         frames=frames[:32], data={"message": message.strip()}))

    def stop(self) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None
        if self._sync_state is not None:
            import torch

            mode, saved = self._sync_state
            torch.cuda.set_sync_debug_mode(mode)
            saved.__exit__(None, None, None)
            self._sync_state = None
        if self._recorder is None:
            return
        try:
            _synchronize(self.device_name)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        step = self._collect_step()
        if step.compile_count or step.from_device_count or step.extra.get("graph_breaks"):
            self._recorder.finish_tail(step)
        skipped = (self._recorder.writer is not None
                   and self._recorder.writer.meta.info.get("skipped"))
        if not self._recorder.steps and not skipped:
            self._add_note("no step barrier was reached: a script traced with --backend "
                           "eager|compile ends each step with lazyscope.barrier()")
        if self._dynamo is not None:
            self._dynamo.stop()
        self._recorder = None

    def on_barrier(self) -> None:
        """A step ended: record it (raises StepLimitReached at the step limit)."""
        if self._recorder is None:
            return
        self._recorder.step(self._collect_step())

    def _collect_step(self) -> Step:
        assert self._recorder is not None
        now = time.perf_counter()
        wall, self._t_last = now - self._t_last, now
        index = self._recorder.next_index
        drained = self._dynamo.drain(index) if self._dynamo is not None else None
        syncs, self._pending_syncs = self._pending_syncs, []
        events: list[Event] = []
        if drained is not None:
            events = drained.compiles + drained.other + drained.graph_breaks
        for event in events + syncs:
            event.step = index
            self._recorder.event(event)
        extra: dict[str, Any] = {}
        if drained is not None and drained.graph_breaks:
            extra["graph_breaks"] = len(drained.graph_breaks)
        return Step(
            index=index,
            wall_s=wall,
            t_end_s=now - self._recorder.t0,
            compile_count=len(drained.compiles) if drained else 0,
            compile_s=drained.compile_seconds if drained else 0.0,
            graph_hashes=[f"dynamo:{e.data['compile_id']}" for e in drained.compiles]
            if drained else [],
            from_device_count=len(syncs),
            extra=extra,
        )


class EagerBackend(TorchBackend):
    """Plain PyTorch eager: no compilation; steps, timings and (on CUDA) host syncs."""

    name = "eager"


class CompileBackend(TorchBackend):
    """``torch.compile`` (inductor); ``--dynamic auto|true|false`` is its ``dynamic`` argument."""

    name = "compile"

    def prepare_model(self, model: Any) -> Any:
        import torch

        return torch.compile(model, dynamic=self.dynamic)

    def start(self, recorder: Recorder) -> None:
        super().start(recorder)
        recorder.set_info(compile_dynamic={None: "auto", True: "true", False: "false"}[
            self.dynamic])

