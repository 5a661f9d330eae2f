"""Plain PyTorch backends: ``eager`` and ``compile`` (``torch.compile`` with inductor).

Same run model and report as the XLA backend. What a step is, and how it is timed:

* The step barrier is the end of a scenario's ``runtime.step(i)`` region, or a call to
  ``lazyscope.barrier()`` in a user's own script. On CUDA the barrier calls
  ``torch.cuda.synchronize()`` before reading the host clock, so a step's wall time covers its
  GPU work; on the CPU the work is done when Python gets control back.
* Compilations, graph breaks and recompile-limit fallbacks come from
  :mod:`lazyscope.backends.pytorch.dynamo` (structured sources), whether or not the program marks
  steps: a script without ``lazyscope.barrier()`` still gets every one, at its line.
* Host syncs (``sync`` events, with the user's line) come from
  ``torch.cuda.set_sync_debug_mode("warn")`` on CUDA: each warning is recorded with the Python
  stack at that moment and not printed, and with the time the host waited (the event's seconds)
  when Python read the value through a tensor method (``.item()``, ``.cpu()``, ``.tolist()``,
  ``if t:`` ...; :mod:`lazyscope.backends.pytorch.stalls`). On the CPU there is no device to
  wait for: the capabilities say so.
* Steps measure wall time and compilations; PyTorch has no per-step counters of executions or
  transfers, so those fields are absent (``meta.capabilities``), never 0.

Collection never synchronises except at barriers on CUDA (which any correct step timer must
do). torch is imported lazily (in methods), so lazyscope imports where torch is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazyscope.backends.base import Collector, Recorder, Runtime, TraceOptions, active
from lazyscope.backends.compile_cache import InductorCache
from lazyscope.backends.pytorch.cudamem import NOT_ON_CPU, CudaMemory
from lazyscope.backends.pytorch.dynamo import DynamoCollector
from lazyscope.backends.pytorch.stalls import StallTimer
from lazyscope.backends.sampler import mark
from lazyscope.core.errors import MissingDependencyError, UsageError
from lazyscope.model import Capabilities, Execute, Sync
from lazyscope.model.ownership import capture_stack, is_own_file

SYNC_WARNING = "called a synchronizing CUDA operation"
STEP_FIELDS = ["wall_s", "t_end_s", "compile_count", "compile_s", "input_s", "barrier_s",
               "own_s"]


def _warning_machinery(file: str) -> bool:
    """The frames between a CUDA sync and the warning's handler: the warnings module's and
    lazyscope's own (the stall clock)."""
    return file == warnings.__file__ or is_own_file(file)


def resolve_device(choice: str | None) -> str:
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


def synchronize(device: str | None) -> None:
    """Wait for the CUDA device when it is in use (``device`` None: whenever CUDA is
    initialised)."""
    import torch

    if device == "cuda" or (device is None and torch.cuda.is_available()
                            and torch.cuda.is_initialized()):
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- runtimes


class EagerRuntime(Runtime):
    """Plain PyTorch, eager."""

    name = "eager"

    def __init__(self, device: str | None = "auto", dynamic: bool | None = None):
        self.device_choice = device or "auto"
        self.dynamic = dynamic
        self.device_name: str | None = None

    def device(self) -> Any:
        import torch

        self.device_name = resolve_device(self.device_choice)
        trace = active()
        if trace is not None and isinstance(trace.collector, TorchCollector):
            trace.collector.note_device(self.device_name)
        return torch.device(self.device_name)

    def barrier(self) -> None:
        trace = active()
        if trace is not None:
            trace.collector.on_user_barrier()  # waits for the device itself, timed
        else:
            synchronize(self.device_name)

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        import torch

        with torch.profiler.record_function(name):
            yield


class CompileRuntime(EagerRuntime):
    """``torch.compile`` (inductor); ``dynamic`` is its ``dynamic`` argument."""

    name = "compile"

    def prepare_model(self, model: Any) -> Any:
        import torch

        return torch.compile(model, dynamic=self.dynamic)


# --------------------------------------------------------------------------- collectors


class TorchCollector(Collector):
    """Collects a plain PyTorch program: steps at ``lazyscope.barrier()``, dynamo's
    compilations and graph breaks, CUDA host syncs."""

    name = "eager"
    install_hint = "pip install torch"

    def __init__(self, options: TraceOptions, *, worker_tracer: Any = None):
        super().__init__(options, worker_tracer=worker_tracer)
        self.device_name: str | None = None
        self._recorder: Recorder | None = None
        self._dynamo: DynamoCollector | None = None
        self._t_last = 0.0
        self._sync_state: tuple[Any, Any] | None = None
        self._stalls: StallTimer | None = None
        self._memory: CudaMemory | None = None
        self._cache: InductorCache | None = None

    def capabilities(self) -> Capabilities:
        return Capabilities(
            step_fields=list(STEP_FIELDS),
            events=["compile", "execute", "graph_break", "eager_fallback", "sync"],
            lazy=False,
        )

    def check_available(self) -> None:
        if importlib.util.find_spec("torch") is None:
            raise MissingDependencyError("torch is not installed: pip install torch")
        resolve_device(self.options.device)

    def describe(self) -> tuple[str, dict[str, str]]:
        import torch

        versions = {"torch": torch.__version__}
        if torch.version.cuda:
            versions["cuda"] = str(torch.version.cuda)
        device = resolve_device(self.options.device)
        if device == "cuda":
            return f"cuda ({torch.cuda.get_device_name()})", versions
        return "cpu", versions

    def prepare_env(self, run_dir: Path) -> None:
        """Nothing: dynamo's sources are read in process."""

    # -- collection ---------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._cache = InductorCache()
        self._dynamo = DynamoCollector(recorder)
        self._dynamo.start()
        for note in self._dynamo.notes:
            recorder.note(note)
        self.note_device(resolve_device(self.options.device))
        self._t_last = time.perf_counter()

    def note_device(self, device: str) -> None:
        """The device the program runs on: enables CUDA sync events, records it."""
        self.device_name = device
        if self._recorder is None:
            return
        meta = self._recorder.meta
        if not meta.device.startswith(device):
            meta.device = device
        if device == "cuda":
            self._install_sync_debug()
            if "sync_s" not in meta.capabilities.step_fields:  # the reads' stalls are timed
                meta.capabilities.step_fields.append("sync_s")
            import torch

            self._memory = CudaMemory(torch.cuda)
        else:
            self._recorder.set_run_info(device_memory={"unmeasured": NOT_ON_CPU})
            note = (f"host syncs: not collected on {device}: torch.cuda.set_sync_debug_mode "
                    "needs a CUDA device")
            if note not in meta.capabilities.unmeasured:
                meta.capabilities.unmeasured.append(note)
            # not measured, so not a kind this run can have: summaries say "not measured",
            # diff shows no delta for it, check refuses a rule on it
            if "sync" in meta.capabilities.events:
                meta.capabilities.events.remove("sync")
        self._recorder.set_run_info(torch_device=device)

    def _install_sync_debug(self) -> None:
        if self._sync_state is not None or self._recorder is None:
            return
        import torch

        if not hasattr(torch.cuda, "set_sync_debug_mode"):
            self._recorder.note("host syncs: torch.cuda.set_sync_debug_mode is missing in this "
                                "torch")
            return
        previous_mode = torch.cuda.get_sync_debug_mode()
        self._stalls = StallTimer(self._record_sync)
        self._stalls.install(torch.Tensor)
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
                # where the program made the read: above the warnings module, which called
                # this, and lazyscope's own clock around the read
                stack = capture_stack(1, above=_warning_machinery)
                if self._stalls is not None:
                    self._stalls.sync(str(message), stack)
                else:
                    self._record_sync(str(message), stack, 0.0)
                return
            previous_show(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        return saved

    def _record_sync(self, message: str, stack: Any, stall: float) -> None:
        """One sync event: where (``stack``), and how long the host waited (``stall``; 0 when
        the read was not one lazyscope times)."""
        if self._recorder is not None:
            self._recorder.event("sync", stack=stack, seconds=stall,
                                 payload=Sync(read="CUDA sync", message=message.strip()))

    def stop(self) -> None:
        if self._sync_state is not None:
            import torch

            mode, saved = self._sync_state
            torch.cuda.set_sync_debug_mode(mode)
            saved.__exit__(None, None, None)
            self._sync_state = None
            if self._stalls is not None:
                self._stalls.remove()
                self._stalls = None
        if self._recorder is None:
            return
        try:
            synchronize(self.device_name)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        values, compiled = self._collect_step()
        if compiled:
            self._recorder.finish_tail(values)
        if self._memory is not None:
            info = self._memory.info()
            self._recorder.set_run_info(device_memory=info if info is not None else {
                "unmeasured": "CUDA was not initialised by the program at any step barrier"})
        if not self._recorder.steps:
            self._recorder.note("no lazyscope.barrier() was reached: no per-step timing (a "
                                "script traced with --backend eager|compile ends each step with "
                                "lazyscope.barrier()); compilations and graph breaks are still "
                                "reported at their lines")
        if self._dynamo is not None:
            self._dynamo.stop()
        cache = self._cache.result() if self._cache is not None else None
        if cache is not None:
            self._recorder.set_run_info(compile_cache=cache)
        self._recorder = None

    def on_user_barrier(self) -> None:
        """A step ended: wait for the device (the step's ``barrier_s``), record it (raises
        StepLimitReached at the step limit). What follows the step's end here is lazyscope's own
        time, counted in the next step (``own_s``)."""
        recorder = self._recorder
        if recorder is None:
            synchronize(self.device_name)
            return
        t0 = time.perf_counter()
        synchronize(self.device_name)
        values, _ = self._collect_step()
        end = self._t_last
        values["barrier_s"] = end - t0
        try:
            if self._memory is not None:
                self._memory.sample()  # the allocator's counters: no sync of its own
            recorder.step(values)
        finally:
            recorder.add_time("own_s", time.perf_counter() - end)

    def _collect_step(self) -> tuple[dict[str, float | None], int]:
        assert self._recorder is not None
        now = time.perf_counter()
        wall, self._t_last = now - self._t_last, now
        count, seconds = self._dynamo.drain() if self._dynamo is not None else (0, 0.0)
        if self._dynamo is not None:
            for compile_id, n in self._dynamo.executions().items():
                self._recorder.event("execute", key=compile_id, value=n,
                                     payload=Execute(cause="compiled function call"))
        return ({"wall_s": wall, "t_end_s": now - self._recorder.t0, "compile_count": count,
                 "compile_s": seconds}, count)


mark(TorchCollector.on_user_barrier, "barrier")


class EagerCollector(TorchCollector):
    """Plain PyTorch eager: steps, timings, torch.compile'd code inside it, CUDA host syncs."""

    name = "eager"


class CompileCollector(TorchCollector):
    """``torch.compile`` (inductor)."""

    name = "compile"

    def start(self, recorder: Recorder) -> None:
        super().start(recorder)
        recorder.set_run_info(compile_dynamic={None: "auto", True: "true", False: "false"}[
            self.options.dynamic])
