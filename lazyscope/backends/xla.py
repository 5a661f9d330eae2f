"""The torch_xla backend: runtime for scenarios and the collector.

Collection, and why it does not change what it measures:

* Step boundaries are the program's own barriers. ``torch_xla.sync`` is replaced by a thin
  wrapper for the duration of the trace; ``xm.mark_step``, ``xp.StepTrace`` and the parallel
  loader all call it through the module attribute, so every barrier passes through the wrapper.
  The wrapper calls the original first, then records the step.
* Per-step numbers are deltas of ``torch_xla.debug.metrics`` structured accessors
  (``metric_data``, ``counter_value``, ``executed_fallback_ops``); no report text is parsed.
* Compilation causes, graph hashes and Python frames come from ``PT_XLA_DEBUG_LEVEL=1`` with
  ``PT_XLA_DEBUG_FILE`` in the run directory (read only at steps that compiled).
* Each compiled graph's input dtypes/shapes and op counts come from XLA's HLO dump
  (``--xla_dump_to``, written at compile time only; see ``xla_hlo.py`` for why and how it is
  paired with the compilation), and ``analyze/recompiles.py`` diffs them.
* Value reads by Python (``.item()``, ``if tensor:`` ...) are ``sync`` events from wrappers on
  ``torch.Tensor`` installed for the trace only (``xla_reads.py``).
* CPU fallbacks are counted per step from torch_xla's counters; their call sites come from a
  dispatch-mode watcher that is on only in warm-up and for one step after an unsited fallback
  (``xla_fallbacks.py``), emitted as ``fallback`` events.

None of this compiles a graph, executes one, or moves data off the device. ``stop()`` waits for
pending device work so the last step's executions are counted (``wait_device_ops`` moves no
data).

torch_xla is imported lazily, in ``start()``/runtime calls, so lazyscope imports without it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import importlib.util
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazyscope.backends.base import Backend, Recorder
from lazyscope.backends.frames import classify_barrier, user_site
from lazyscope.backends.ptxla_debug import DebugFileReader
from lazyscope.backends.xla_fallbacks import FallbackSites, op_base
from lazyscope.backends.xla_hlo import HloDumpReader, pair_modules
from lazyscope.backends.xla_reads import ValueReadHooks
from lazyscope.errors import MissingDependencyError
from lazyscope.model import Event, Step

DEBUG_FILE = "xla_debug.txt"
GRAPHS_DIR = "graphs"
#: XLA_METRICS_SAMPLES while tracing (unless set): see prepare_env
METRICS_SAMPLES = 32
DUMP_FLAG = "--xla_dump_to"
#: the dump directory lazyscope chose for this process (XLA reads XLA_FLAGS once per process)
OWN_DUMP_ENV = "LAZYSCOPE_XLA_DUMP_DIR"
INSTALL_HINT = (
    "torch_xla is not installed: pip install 'lazyscope[xla]' "
    "(torch==2.9.0 torch_xla==2.9.0), or use --backend eager"
)
#: ops counted as CPU fallbacks by torch_xla that are really a value read (a host sync)
NOT_FALLBACKS = frozenset({"aten::_local_scalar_dense"})

_METRICS = {
    "compile": "CompileTime",
    "execute": "ExecuteTime",
    "execute_replicated": "ExecuteReplicatedTime",
    "to_device": "TransferToDeviceTime",
    "from_device": "TransferFromDeviceTime",
    "to_device_bytes": "OutboundData",
    "from_device_bytes": "InboundData",
}


def default_pjrt_device() -> str:
    """TPU when this machine has TPU chips, else CPU."""
    if glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"):
        return "TPU"
    return "CPU"


def _metric(met: Any, name: str) -> tuple[int, float, list[tuple[float, float]]]:
    data = met.metric_data(name)
    if data is None:
        return 0, 0.0, []
    total, acc, samples = data
    return int(total), float(acc), list(samples)


class _Snapshot:
    """The cumulative counters at one moment."""

    __slots__ = ("counts", "sums", "fallbacks", "samples")

    def __init__(self, met: Any):
        self.counts: dict[str, int] = {}
        self.sums: dict[str, float] = {}
        self.samples: dict[str, list[tuple[float, float]]] = {}
        for key, name in _METRICS.items():
            count, acc, samples = _metric(met, name)
            self.counts[key] = count
            self.sums[key] = acc
            if key == "compile":
                self.samples[key] = samples
        self.fallbacks: dict[str, int] = {}
        for op in met.executed_fallback_ops():
            value = met.counter_value(op)
            if value:
                self.fallbacks[op] = int(value)

    def delta(self, before: _Snapshot) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for key in _METRICS:
            d[key] = self.counts[key] - before.counts[key]
            d[key + "_sum"] = self.sums[key] - before.sums[key]
        d["fallbacks"] = {
            op: n - before.fallbacks.get(op, 0)
            for op, n in self.fallbacks.items()
            if n - before.fallbacks.get(op, 0) > 0
        }
        new = d["compile"]
        samples = self.samples["compile"]
        # torch_xla keeps the last XLA_METRICS_SAMPLES samples: if more compilations than that
        # happened in one step, the earliest ones have no sample (None: their time is unknown)
        kept = [v / 1e9 for _, v in samples[-new:]] if new > 0 else []
        d["compile_samples_s"] = [None] * (max(new, 0) - len(kept)) + kept
        return d


class XlaBackend(Backend):
    """PyTorch/XLA: TPU on a TPU VM, the CPU elsewhere (``PJRT_DEVICE``)."""

    name = "xla"
    install_hint = INSTALL_HINT

    def __init__(self) -> None:
        self._recorder: Recorder | None = None
        self._orig_sync: Any = None
        self._met: Any = None
        self._last: _Snapshot | None = None
        self._t_last = 0.0
        self._debug: DebugFileReader | None = None
        self._in_barrier = False
        self._graphs: HloDumpReader | None = None
        self._reads: ValueReadHooks | None = None
        self._fallback_sites: FallbackSites | None = None
        self._patched: list[tuple[Any, Any]] = []
        #: record each compiled graph's input shapes from XLA's HLO dump (written at compile
        #: time only); off, compilations are still counted, timed, placed and given a cause,
        #: but not diffed by input shape
        self.graph_shapes = True

    # -- availability and environment -------------------------------------------------
    def check_available(self) -> None:
        if importlib.util.find_spec("torch_xla") is None:
            raise MissingDependencyError(INSTALL_HINT)

    def prepare_env(self, run_dir: Any | None) -> None:
        os.environ.setdefault("PJRT_DEVICE", default_pjrt_device())
        if run_dir is None:
            return
        level = os.environ.get("PT_XLA_DEBUG_LEVEL", "")
        if not level.lstrip("-").isdigit() or int(level) < 1:
            os.environ["PT_XLA_DEBUG_LEVEL"] = "1"
        os.environ["PT_XLA_DEBUG_FILE"] = str(Path(run_dir).resolve() / DEBUG_FILE)
        os.environ.setdefault("PT_XLA_DEBUG_MAX_FRAME", "64")
        # torch_xla's timing metrics keep their last N samples (default 1024) for the
        # percentiles of metrics_report(), and metric_data() copies all of them into Python
        # tuples at every call: ~80 us per barrier for ExecuteTime alone once 1024 executions
        # ran, more than everything else lazyscope does at a barrier. Counts and totals do not
        # depend on it; only the percentile window of torch_xla's own report does.
        os.environ.setdefault("XLA_METRICS_SAMPLES", str(METRICS_SAMPLES))
        if self.graph_shapes and dump_dir(os.environ.get("XLA_FLAGS", "")) is None:
            base = _fast_tmp()
            sweep_stale_dump_dirs(base or tempfile.gettempdir())
            own = tempfile.mkdtemp(prefix=f"{DUMP_PREFIX}{os.getpid()}-", dir=base)
            atexit.register(shutil.rmtree, own, True)
            os.environ[OWN_DUMP_ENV] = own
            os.environ["XLA_FLAGS"] = " ".join(
                filter(None, [os.environ.get("XLA_FLAGS", ""), f"{DUMP_FLAG}={own}"]))

    def describe(self) -> tuple[str, dict[str, str]]:
        import torch
        import torch_xla

        try:
            device = f"{torch_xla.device()} ({torch_xla.real_devices()[0]})"
        except Exception:  # noqa: BLE001 - descriptive only
            device = os.environ.get("PJRT_DEVICE", "")
        return device, {"torch": torch.__version__, "torch_xla": torch_xla.__version__}

    # -- runtime for scenarios ----------------------------------------------------------
    def device(self) -> Any:
        self.prepare_env(None)
        import torch_xla

        return torch_xla.device()

    def barrier(self) -> None:
        import torch_xla

        torch_xla.sync()

    @contextlib.contextmanager
    def step(self, index: int, name: str = "train_step") -> Iterator[None]:
        import torch_xla.debug.profiler as xp

        # StepTrace ends with torch_xla.sync(): the step barrier.
        with xp.StepTrace(name, step_num=index):
            yield

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        import torch_xla.debug.profiler as xp

        with xp.Trace(name):
            yield

    # -- collection ---------------------------------------------------------------------
    def start(self, recorder: Recorder) -> None:
        import torch_xla
        import torch_xla.debug.metrics as met

        self._recorder = recorder
        self._met = met
        debug_file = os.environ.get("PT_XLA_DEBUG_FILE")
        self._debug = DebugFileReader(debug_file) if debug_file else None
        if self._debug is not None:
            self._debug.read_new()  # skip what an earlier trace in this process wrote
        dump = dump_dir(os.environ.get("XLA_FLAGS", ""))
        if dump is not None and self.graph_shapes:
            run_dir = recorder.writer.path if recorder.writer is not None else None
            self._graphs = HloDumpReader(
                dump, owned=dump == os.environ.get(OWN_DUMP_ENV),
                keep_dir=run_dir / GRAPHS_DIR if run_dir is not None else None)
            self._graphs.skip_existing()
        self._last = _Snapshot(met)
        self._t_last = time.perf_counter()
        self._orig_sync = torch_xla.sync

        @functools.wraps(self._orig_sync)
        def sync(*args: Any, **kwargs: Any) -> Any:
            result = self._orig_sync(*args, **kwargs)
            if not self._in_barrier:
                self._on_barrier()
            return result

        # torch_xla.sync is what xm.mark_step, xp.StepTrace and the parallel loader call;
        # torch_xla.torch_xla.sync is what torch_xla.step() calls.
        import torch_xla.torch_xla as txla_module

        for module in (torch_xla, txla_module):
            self._patched.append((module, module.sync))
            module.sync = sync
        self._reads = ValueReadHooks(self._recorder.event, lambda: self._recorder.next_index
                                     if self._recorder else -1, self._executions)
        self._reads.install()
        self._fallback_sites = FallbackSites()
        self._fallback_sites.enable(None)  # warm-up: look for fallbacks everywhere

    def _executions(self) -> int:
        data = self._met.metric_data("ExecuteTime") if self._met is not None else None
        return int(data[0]) if data else 0

    def stop(self) -> None:
        for module, original in reversed(self._patched):
            module.sync = original
        self._patched = []
        self._orig_sync = None
        if self._reads is not None:
            self._reads.uninstall()
            self._reads = None
        if self._fallback_sites is not None:
            self._fallback_sites.disable()
        if self._recorder is None or self._last is None:
            return
        try:
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        step = self._collect_step()
        if self._fallback_sites is not None:
            self._fallback_sites.disable()
            self._fallback_sites = None
        if _has_activity(step):
            self._recorder.finish_tail(step)
        self._recorder = None

    def _on_barrier(self) -> None:
        self._in_barrier = True
        try:
            step = self._collect_step()
        finally:
            self._in_barrier = False
        assert self._recorder is not None
        self._recorder.step(step)

    def _collect_step(self) -> Step:
        assert self._recorder is not None and self._last is not None
        now = time.perf_counter()
        snap = _Snapshot(self._met)
        d = snap.delta(self._last)
        self._last = snap
        wall = now - self._t_last
        self._t_last = now
        index = self._recorder.next_index
        compile_events = self._compile_events(index, d["compile"], d["compile_samples_s"])
        fallbacks = {op: n for op, n in d["fallbacks"].items() if op not in NOT_FALLBACKS}
        self._fallback_events(index, fallbacks)
        return Step(
            index=index,
            wall_s=wall,
            t_end_s=now - self._recorder.t0,
            compile_count=d["compile"],
            compile_s=d["compile_sum"] / 1e9,
            graph_hashes=[e.data["graph_hash"] for e in compile_events if e.data.get("graph_hash")],
            execute_count=d["execute"] + d["execute_replicated"],
            execute_s=(d["execute_sum"] + d["execute_replicated_sum"]) / 1e9,
            to_device_count=d["to_device"],
            to_device_bytes=int(d["to_device_bytes_sum"]),
            to_device_s=d["to_device_sum"] / 1e9,
            from_device_count=d["from_device"],
            from_device_bytes=int(d["from_device_bytes_sum"]),
            from_device_s=d["from_device_sum"] / 1e9,
            fallback_ops=fallbacks,
        )

    def _compile_events(self, index: int, count: int, seconds: list[float | None]
                        ) -> list[Event]:
        """Turn the new PT_XLA_DEBUG compilation blocks into events of this step."""
        if count <= 0 or self._debug is None or self._recorder is None:
            return []
        records = [r for r in self._debug.read_new() if r.kind == "compile"]
        graphs = self._graphs
        modules = graphs.take_new() if graphs is not None else []
        paired = pair_modules([r.num_inputs for r in records], modules)
        events = []
        for i, (rec, graph) in enumerate(zip(records, paired, strict=True)):
            cause_kind, cause = classify_barrier(rec.frames)
            hlo_file = (graphs.keep_text(graph, rec.graph_hash)
                        if graphs is not None and graph is not None else None)
            event = Event(
                kind="compile",
                step=index,
                seconds=(seconds[i] or 0.0) if i < len(seconds) else 0.0,
                site=user_site(rec.frames),
                frames=rec.frames,
                data={
                    "graph_hash": rec.graph_hash,
                    "cause": cause,
                    "cause_kind": cause_kind,
                    "xla_cause": rec.cause,
                    "num_inputs": rec.num_inputs,
                    "num_outputs": rec.num_outputs,
                    "sizes_gb": rec.sizes_gb,
                    **(graph.to_json() if graph is not None else {}),
                    **({"hlo_file": hlo_file} if hlo_file else {}),
                },
            )
            self._recorder.event(event)
            events.append(event)
        for module in modules:  # the kept ones were moved into the run: the rest go
            assert graphs is not None
            graphs.discard(module)
        return events

    # -- profiler window (lazyscope trace --profile) -----------------------------------
    supports_profile = True

    def start_profile(self, logdir: Any) -> None:
        """Start an in-process XProf capture (``xp.start_trace``) writing under ``logdir``."""
        import torch_xla.debug.profiler as xp

        xp.start_trace(str(logdir))

    def stop_profile(self) -> None:
        """Wait for pending device work, stop the capture and write
        ``logdir/plugins/profile/<timestamp>/*.xplane.pb``."""
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.profiler as xp

        xm.wait_device_ops()
        xp.stop_trace()


    def _fallback_events(self, index: int, fallbacks: dict[str, int]) -> None:
        """Emit call sites of this step's fallback ops; watch the next step if some lack one."""
        sites = self._fallback_sites
        if sites is None or self._recorder is None:
            return
        found = sites.take(set(fallbacks)) if sites.active else []
        for op, site, calls, seconds in found:
            self._recorder.event(Event(
                kind="fallback", step=index, seconds=seconds, site=site,
                data={"op": op, "calls": calls, "step_count": fallbacks.get(op, 0)},
            ))
        unsited = {op_base(op) for op in fallbacks} - sites.sited
        warmup = index + 1 < self._warmup_steps()
        sites.disable()
        if warmup:
            sites.enable(None)
        elif unsited:
            sites.enable(unsited)

    def _warmup_steps(self) -> int:
        writer = self._recorder.writer if self._recorder is not None else None
        return int(writer.meta.warmup_steps) if writer is not None else 2


#: RAM-backed directory for XLA's dump when it has this much room (the CPU backend also dumps
#: LLVM IR and objects for every kernel: ~800 files per compiled training step of the tiny
#: decoder; written to disk they added ~25% to compile time, to tmpfs a few %)
SHM_DIR, SHM_MIN_FREE = "/dev/shm", 1 << 30


def _fast_tmp() -> str | None:
    """``/dev/shm`` when it is a writable directory with room, else the default temp dir."""
    try:
        st = os.statvfs(SHM_DIR)
        if os.access(SHM_DIR, os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
            return SHM_DIR
    except OSError:
        pass
    return None


DUMP_PREFIX = "lazyscope-hlo-"


def sweep_stale_dump_dirs(base: str) -> None:
    """Remove dump directories of lazyscope processes that no longer run (a SIGKILLed trace
    cannot remove its own; the name carries the pid that made it)."""
    for path in glob.glob(os.path.join(glob.escape(base), DUMP_PREFIX + "*")):
        pid = os.path.basename(path)[len(DUMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # exists but not ours to signal: alive
            continue


def dump_dir(xla_flags: str) -> str | None:
    """The ``--xla_dump_to`` directory in an ``XLA_FLAGS`` value, if any."""
    try:
        words = shlex.split(xla_flags)
    except ValueError:
        words = xla_flags.split()
    found = None
    for i, word in enumerate(words):
        if word.startswith(DUMP_FLAG + "="):
            found = word.split("=", 1)[1]
        elif word == DUMP_FLAG and i + 1 < len(words):
            found = words[i + 1]
    return found or None


def _has_activity(step: Step) -> bool:
    return bool(
        step.compile_count
        or step.execute_count
        or step.to_device_count
        or step.from_device_count
        or step.fallback_ops
    )
