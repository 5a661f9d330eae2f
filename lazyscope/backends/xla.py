"""The torch_xla backend: the runtime scenarios run on, and the collector.

Collection, and why it does not change what it measures:

* Nothing touches the XLA runtime before the program does: ``describe()`` reads environment
  variables and versions only, and metrics are read from torch_xla's registry, which needs no
  client (``xmp.spawn`` and ``use_spmd()`` refuse to run once a client exists). The device is
  recorded at the first step barrier, when the program has created it.
* Step boundaries are the program's own barriers. ``torch_xla.sync`` is wrapped for the trace,
  in the package and in the ``torch_xla.torch_xla`` submodule (which ``torch_xla.step()`` and
  ``torch_xla.compile`` call), and a call counts as a step barrier only when the program asked
  for one (``torch_xla.sync()``, ``xm.mark_step()``, ``xp.StepTrace``, the parallel loader, the
  end of ``torch_xla.step()`` / a compiled call), never when torch_xla syncs for itself (the
  dynamo bridge, ``torch_xla.compile`` flushing earlier work): see ``xla_causes.py``.
* Per-step numbers are deltas of ``torch_xla.debug.metrics`` structured accessors
  (``metric_data``, ``counter_value``, ``executed_fallback_ops``), eager mode's
  ``EagerOp*`` metrics and replicated (SPMD) executions included; no report text is parsed.
* Compilation causes, graph hashes and Python frames come from ``PT_XLA_DEBUG_LEVEL=1`` with
  ``PT_XLA_DEBUG_FILE`` in the run directory (read only at steps that compiled); each graph's
  inputs and op counts from XLA's HLO dump (``xla_hlo.py``), written at compile time only.
* Value reads by Python (``.item()``, ``if tensor:`` ...) are ``sync`` events from wrappers on
  ``torch.Tensor`` (``xla_reads.py``); CPU fallbacks are counted per step from torch_xla's
  counters, and they and the host syncs hidden inside torch ops get their call sites from the
  watch window (``xla_watch.py``), open in warm-up and for one step after something unsited.

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
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazyscope.backends.base import Collector, Recorder, Runtime, TraceOptions
from lazyscope.backends.ptxla_debug import DebugFileReader
from lazyscope.backends.xla_causes import barrier_source, classify_compile, is_program_barrier
from lazyscope.backends.xla_hlo import HloDumpReader, pair_modules, parse_module
from lazyscope.backends.xla_reads import ValueReadHooks
from lazyscope.backends.xla_watch import SCALAR_READ_OP, CallWatch, Counters, Hit, op_base
from lazyscope.errors import MissingDependencyError
from lazyscope.frames import bound_stack, is_lazyscope_file, is_library_file, make_frame
from lazyscope.model import (
    EVENT_KINDS,
    OWNER_USER,
    STEP_FIELDS,
    Capabilities,
    Compile,
    Fallback,
    FallbackExec,
    Frame,
    Stack,
    Sync,
)

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
#: warm-up steps in which the watch window is open
WATCH_WARMUP_STEPS = 2
#: graphs compiled without source lines whose program is lowered again with them, per run
MAX_PROBES = 8
#: times the window reopens for device-to-host transfers nobody explained (bounded: some
#: transfers happen outside any torch call, e.g. inside xm.mesh_reduce)
MAX_TRANSFER_WINDOWS = 3

#: torch_xla's metrics of executions: graph executions, the replicated executions of SPMD /
#: multi-device programs and eager mode's op executions
_EXECUTE_METRICS = ("ExecuteTime", "ExecuteReplicatedTime", "EagerOpExecuteTime")


def default_pjrt_device() -> str:
    """TPU when this machine has TPU chips, else CPU."""
    if glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"):
        return "TPU"
    return "CPU"


#: torch_xla's own counters that the run's totals must equal (recorded at the end of the run as
#: ``info["runtime_counts"]``, shown by the report beside lazyscope's counts)
RUNTIME_COUNTERS = ("CompileTime", "EagerOpCompileTime", "ExecuteTime", "ExecuteReplicatedTime",
                    "EagerOpExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime")


def runtime_counts(met: Any) -> dict[str, int]:
    """How many samples each of :data:`RUNTIME_COUNTERS` holds now (absent ones: 0)."""
    out = {}
    for name in RUNTIME_COUNTERS:
        data = met.metric_data(name)
        out[name] = int(data[0]) if data else 0
    return out


class _Metrics:
    """torch_xla's cumulative metrics, turned into what changed since the last :meth:`take`.

    This runs at every step barrier, on the thread that feeds the device (where every
    microsecond is the program's; on XLA:CPU it also takes the cores the step executes on): one
    binding call per metric, the byte totals of a transfer direction read only when its
    transfer count moved (torch_xla samples both in the same function), the compile samples
    kept only when a compilation happened, no intermediate dicts."""

    __slots__ = ("_data", "_met", "_seen", "_fallbacks")

    def __init__(self, met: Any, metric_data: Any = None):
        self._met = met
        #: torch_xla's binding itself (met.metric_data is a Python function around it)
        self._data = metric_data or met.metric_data
        #: metric -> (samples, accumulated value) at the last take
        self._seen: dict[str, tuple[int, float]] = {}
        self._fallbacks: dict[str, int] = {}
        self.take(everything=True)  # the baseline: what ran before the trace is not the run's

    def _delta(self, name: str) -> tuple[int, float, Any]:
        data = self._data(name)
        if data is None:
            return 0, 0.0, None
        total, acc, samples = data
        seen = self._seen.get(name)
        if seen is None:
            self._seen[name] = (total, acc)
            return total, acc, samples
        if total == seen[0]:
            return 0, 0.0, None
        self._seen[name] = (total, acc)
        return total - seen[0], acc - seen[1], samples

    def _sum(self, names: tuple[str, ...]) -> tuple[int, float]:
        count, acc = 0, 0.0
        for name in names:
            n, v, _ = self._delta(name)
            count += n
            acc += v
        return count, acc

    def take(self, everything: bool = False) -> tuple[dict[str, Any], list[tuple[float, float]],
                                                     dict[str, int]]:
        """(step values of the counters, the kept CompileTime samples when something compiled,
        fallback op -> executions) since the last take; ``everything``: the byte totals too
        even when no transfer was counted (the end of the run)."""
        compiles, compile_ns, samples = self._delta("CompileTime")
        n, v, _ = self._delta("EagerOpCompileTime")
        executions, execute_ns = self._sum(_EXECUTE_METRICS)
        to_n, to_ns, _ = self._delta("TransferToDeviceTime")
        from_n, from_ns, _ = self._delta("TransferFromDeviceTime")
        values = {
            "compile_count": compiles + n,
            "compile_s": (compile_ns + v) / 1e9,
            "execute_count": executions,
            "execute_s": execute_ns / 1e9,
            "to_device_count": to_n,
            "to_device_bytes": self._delta("OutboundData")[1] if to_n or everything else 0.0,
            "to_device_s": to_ns / 1e9,
            "from_device_count": from_n,
            "from_device_bytes": self._delta("InboundData")[1] if from_n or everything else 0.0,
            "from_device_s": from_ns / 1e9,
        }
        fallbacks: dict[str, int] = {}
        ops = self._met.executed_fallback_ops()
        if ops:
            counter_value, last = self._met.counter_value, self._fallbacks
            for op in ops:
                total = int(counter_value(op) or 0)
                if total > last.get(op, 0):
                    fallbacks[op] = total - last.get(op, 0)
                    last[op] = total
        return values, list(samples) if compiles and samples else [], fallbacks


#: call sites of torch_xla.sync seen so far -> (ends a step of the program, barrier_source)
_BARRIER_SITES: dict[tuple[Any, ...], tuple[bool, str]] = {}


def _barrier_site(skip: int, limit: int = 24) -> tuple[bool, str]:
    """:func:`is_program_barrier` and :func:`barrier_source` of the caller's ``sync``, decided
    once per call site: the key is the (code, line) of each frame up to the first user frame,
    all the decision depends on. This runs at every sync of the program."""
    try:
        f: Any = sys._getframe(skip + 1)
    except ValueError:
        return True, "own"
    key: list[Any] = []
    while f is not None and len(key) < 2 * limit:
        code = f.f_code
        key += (code, f.f_lineno)
        if not is_library_file(code.co_filename):
            break
        f = f.f_back
    site = tuple(key)
    found = _BARRIER_SITES.get(site)
    if found is None:
        frames = [Frame(c.co_filename, line, c.co_name, is_library_file(c.co_filename))
                  for c, line in zip(site[::2], site[1::2], strict=True)]
        found = (is_program_barrier(frames), barrier_source(frames))
        if len(_BARRIER_SITES) > 4096:  # a program that syncs from ever new code
            _BARRIER_SITES.clear()
        _BARRIER_SITES[site] = found
    return found


# --------------------------------------------------------------------------- runtime


class XlaRuntime(Runtime):
    """PyTorch/XLA: TPU on a TPU VM, the CPU elsewhere (``PJRT_DEVICE``)."""

    name = "xla"

    def device(self) -> Any:
        os.environ.setdefault("PJRT_DEVICE", default_pjrt_device())
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


# --------------------------------------------------------------------------- collector


class XlaCollector(Collector):
    """Collects a torch_xla program (see the module docstring)."""

    name = "xla"
    install_hint = INSTALL_HINT
    supports_profile = True

    def __init__(self, options: TraceOptions):
        super().__init__(options)
        self._recorder: Recorder | None = None
        self._orig_sync: Any = None
        self._met: Any = None
        self._last: _Metrics | None = None
        self._runtime_base: dict[str, int] = {}
        #: the source of the last program barrier (see barrier_source)
        self._last_barrier = ""
        self._t_last = 0.0
        self._debug: DebugFileReader | None = None
        self._in_barrier = False
        self._graphs: HloDumpReader | None = None
        self._reads: ValueReadHooks | None = None
        self._watch: CallWatch | None = None
        self._sited: set[str] = set()
        self._transfer_windows = 0
        self._patched: list[tuple[Any, Any]] = []
        self._device_noted = False
        #: the run's info says eager mode (set once)
        self._eager_seen = False
        self._use_eager_mode: Any = bool
        self._reads_this_step = 0
        #: the IR debug flag before the trace, or None when the user keeps it on by env
        self._ir_debug_saved: bool | None = None
        #: the thread whose barriers are steps (the first to reach one)
        self._step_thread: int | None = None
        self._spawn: Any = None
        #: the program uses torch.compile: the watch window stays closed (dynamo would trace
        #: its torch function mode and specialise graphs on it, then recompile without it)
        self._dynamo_in_use = False
        #: source lines are recorded in the IR of the step in progress
        self._ir_on = False
        #: compile events of graphs traced without source lines, held until the next barrier
        #: reads the same program with them (see :meth:`_probe_lines`)
        self._held: list[tuple[Compile, float, Stack, str, int]] = []
        self._probes = 0

    def capabilities(self) -> Capabilities:
        return Capabilities(step_fields=list(STEP_FIELDS),
                            events=[k for k in EVENT_KINDS
                                    if k not in ("graph_break", "eager_fallback")])

    # -- availability and environment -------------------------------------------------
    def check_available(self) -> None:
        if importlib.util.find_spec("torch_xla") is None:
            raise MissingDependencyError(INSTALL_HINT)

    def prepare_env(self, run_dir: Path) -> None:
        os.environ.setdefault("PJRT_DEVICE", default_pjrt_device())
        level = os.environ.get("PT_XLA_DEBUG_LEVEL", "")
        if not level.lstrip("-").isdigit() or int(level) < 1:
            os.environ["PT_XLA_DEBUG_LEVEL"] = "1"
        # abspath, not resolve(): an absolute path is all torch_xla needs, and the directory may
        # not exist yet (resolve() on a path through a symbolic-link loop raises)
        os.environ["PT_XLA_DEBUG_FILE"] = os.path.join(os.path.abspath(run_dir), DEBUG_FILE)
        os.environ.setdefault("PT_XLA_DEBUG_MAX_FRAME", "64")
        # torch_xla's timing metrics keep their last N samples (default 1024) for the
        # percentiles of metrics_report(), and metric_data() copies all of them into Python
        # tuples at every call: ~80 us per barrier for ExecuteTime alone once 1024 executions
        # ran, more than everything else lazyscope does at a barrier. Counts and totals do not
        # depend on it; only the percentile window of torch_xla's own report does.
        os.environ.setdefault("XLA_METRICS_SAMPLES", str(METRICS_SAMPLES))
        flags = os.environ.get("XLA_FLAGS", "")
        inherited = os.environ.get(OWN_DUMP_ENV)
        if inherited and dump_dir(flags) == inherited and \
                not os.path.basename(inherited).startswith(f"{DUMP_PREFIX}{os.getpid()}-"):
            # a worker process inherited its parent trace's dump directory: take its own
            os.environ["XLA_FLAGS"] = remove_dump_flag(flags)
            del os.environ[OWN_DUMP_ENV]
        if self.options.graph_shapes and dump_dir(os.environ.get("XLA_FLAGS", "")) is None:
            base = _fast_tmp()
            sweep_stale_dump_dirs(base or tempfile.gettempdir())
            own = tempfile.mkdtemp(prefix=f"{DUMP_PREFIX}{os.getpid()}-", dir=base)
            atexit.register(shutil.rmtree, own, True)
            os.environ[OWN_DUMP_ENV] = own
            os.environ["XLA_FLAGS"] = " ".join(
                filter(None, [os.environ.get("XLA_FLAGS", ""), f"{DUMP_FLAG}={own}"]))

    def describe(self) -> tuple[str, dict[str, str]]:
        """The device from the environment only (the runtime is the program's to start); the
        real device is recorded at the first barrier."""
        try:
            import torch
            import torch_xla
        except Exception as exc:  # noqa: BLE001 - a broken install: one line, exit 4
            why = (str(exc).strip().splitlines() or [""])[-1]
            raise MissingDependencyError(
                f"torch_xla cannot be imported: {type(exc).__name__}: {why} (reinstall "
                "torch==2.9.0 torch_xla==2.9.0, or use --backend eager)") from None
        pjrt = os.environ.get("PJRT_DEVICE", "")
        return f"xla ({pjrt})" if pjrt else "xla", {"torch": torch.__version__,
                                                    "torch_xla": torch_xla.__version__}

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
        if dump is not None and self.options.graph_shapes:
            self._graphs = HloDumpReader(
                dump, owned=dump == os.environ.get(OWN_DUMP_ENV),
                keep_dir=recorder.writer.path / GRAPHS_DIR)
            self._graphs.skip_existing()
        self._last = _Metrics(met, getattr(torch_xla._XLAC, "_xla_metric_data", None))
        self._use_eager_mode = getattr(torch_xla._XLAC, "_get_use_eager_mode", bool)
        self._runtime_base = runtime_counts(met)
        self._t_last = time.perf_counter()
        submodule = sys.modules["torch_xla.torch_xla"]
        self._orig_sync = submodule.sync

        @functools.wraps(self._orig_sync)
        def sync(*args: Any, **kwargs: Any) -> Any:
            if self._in_barrier:
                return self._orig_sync(*args, **kwargs)
            thread = threading.get_ident()
            barrier, source = _barrier_site(1)
            if barrier:
                # The parallel loader syncs before each batch unless a StepTrace just marked
                # the step (torch_xla's own rule). A loop that marks its steps itself
                # (torch_xla.compile'd step, torch_xla.step(), xm.mark_step()) over the loader
                # would get two barriers per iteration: the loader's sync right after the
                # program's own barrier ends no step of its own (its work goes to the next).
                if source == "loader" and self._last_barrier == "own":
                    barrier, source = False, "merged"
                self._last_barrier = source
            if barrier and self._step_thread is None:
                self._step_thread = thread
            if self._held and barrier and thread == self._step_thread:
                self._in_barrier = True
                try:
                    self._probe_lines()
                    self._release_held()
                finally:
                    self._in_barrier = False
            result = self._orig_sync(*args, **kwargs)
            if barrier and thread == self._step_thread:
                self._on_barrier()
            return result

        # torch_xla.sync is what xm.mark_step, xp.StepTrace and the parallel loader call; the
        # submodule's global is what torch_xla.step() and torch_xla.compile call. (The package
        # attribute torch_xla.torch_xla is the package itself: `from .torch_xla import *`
        # re-exports the submodule's `torch_xla` name, so the submodule is only reachable
        # through sys.modules.)
        for module in (torch_xla, submodule):
            self._patched.append((module, module.sync))
            module.sync = sync
        self._reads = ValueReadHooks(self._on_read, self._executions)
        self._reads.install()
        self._watch = CallWatch(Counters(met))
        self._watch.enable()  # warm-up: watch every call
        self._watch_for_dynamo()
        self._start_source_lines(torch_xla)
        if recorder.meta.rank is None:  # a worker never spawns ranks of its own
            from lazyscope.backends.xla_spawn import SpawnHook

            self._spawn = SpawnHook(recorder.writer.path, self.options, recorder)
            self._spawn.install()

    # -- source lines of graph ops -----------------------------------------------------
    def _start_source_lines(self, torch_xla: Any) -> None:
        """Record source locations in the IR (torch_xla's IR debug, switched at run time) in
        warm-up and in every step after a step that compiled: a recompiled graph then says which
        user line made each input and op. Steady steps run without (it costs tracing time: +3%
        to +20% per step on a small MLP, measured); graph hashes do not change with it."""
        if not self.options.graph_shapes or not hasattr(torch_xla._XLAC, "_set_ir_debug"):
            return
        if any(os.environ.get(v, "0") not in ("", "0") for v in ("XLA_IR_DEBUG",
                                                                 "XLA_HLO_DEBUG")):
            return  # the user keeps it on: leave it
        self._ir_debug_saved = bool(torch_xla._XLAC._get_ir_debug())
        torch_xla._XLAC._set_ir_debug(True)
        self._ir_on = True

    def _next_source_lines(self, compiled: bool) -> None:
        if self._ir_debug_saved is None or self._recorder is None:
            return
        import torch_xla

        on = compiled or self._recorder.next_index + 1 < WATCH_WARMUP_STEPS
        if on != self._ir_on:  # a steady run switches nothing at its barriers
            torch_xla._XLAC._set_ir_debug(on)
            self._ir_on = on

    # -- source lines of a graph compiled while they were off -----------------------------
    def _hold_blind(self, payload: Compile, seconds: float, stack: Stack, key: str) -> bool:
        """A user graph compiled in a step traced without source lines (steady state): hold
        its event until the next barrier, which may trace the same program with them."""
        if self._ir_on or self._ir_debug_saved is None or self._recorder is None or \
                payload.owner != OWNER_USER or payload.inputs is None or payload.lines or \
                self._probes >= MAX_PROBES:
            return False
        self._held.append((payload, seconds, stack, key, self._recorder.steps))
        return True

    def _release_held(self) -> None:
        held, self._held = self._held, []
        if self._recorder is None:
            return
        for payload, seconds, stack, key, step in held:
            self._recorder.event("compile", seconds=seconds, stack=stack, payload=payload,
                                 key=key, step=step)

    def _probe_lines(self) -> None:
        """At the barrier after a step that compiled a graph without source lines, before the
        program's sync: lower the pending graph of this device's live tensors (traced with
        source lines on: a step that compiled turns them on for the next) to HLO text, and
        when it has exactly the held graph's inputs it is the same program: the held graph
        takes its per-line digests and input origins, so the analysis can name the line that
        changed. Costs one lowering (no compilation, no execution), at most MAX_PROBES times
        per run."""
        self._probes += 1
        try:
            import gc

            import torch
            import torch_xla

            device = torch_xla._XLAC._xla_get_default_device()
            tensors = []
            for obj in gc.get_objects():
                if issubclass(type(obj), torch.Tensor):
                    try:
                        if obj.device.type == "xla" and str(obj.device) == device:
                            tensors.append(obj)
                    except Exception:  # noqa: BLE001 - exotic tensor subclasses
                        continue
            if not tensors:
                return
            need = torch_xla._XLAC._check_tensor_need_materialization(tensors)
            pending = [t for t, n in zip(tensors, need, strict=True) if n]
            if not pending:
                return
            probe = parse_module(torch_xla._XLAC._get_xla_tensors_hlo(pending))
        except Exception:  # noqa: BLE001 - best effort: the held events keep the barrier
            return
        if probe is None or not probe.lines:
            return
        sigs = Counter((d, tuple(sh)) for d, sh in probe.inputs)
        origins: dict[tuple, list[tuple[str, int]]] = {}
        for i, (d, sh) in enumerate(probe.inputs):
            if i in probe.origins:
                origins.setdefault((d, tuple(sh)), []).append(probe.origins[i])
        for payload, *_ in self._held:
            inputs = payload.inputs or []
            if Counter((i.dtype, tuple(i.shape)) for i in inputs) != sigs:
                continue  # another program: its line stays unknown
            payload.lines = [list(x) for x in probe.lines]
            taken: dict[tuple, int] = {}
            for gi in inputs:
                sig = (gi.dtype, tuple(gi.shape))
                n = taken.get(sig, 0)
                found = origins.get(sig, [])
                if gi.origin is None and n < len(found):
                    gi.origin = make_frame(*found[n], "")
                taken[sig] = n + 1

    def _watch_for_dynamo(self) -> None:
        """Close the watch window for good once the program calls ``torch.compile``: dynamo
        guards on the torch function mode stack, so a window open while it compiles would
        change its graphs (measured: 3 compilations instead of 1 with the openxla backend)."""
        import torch

        original = torch.compile

        @functools.wraps(original)
        def compile_(*args: Any, **kwargs: Any) -> Any:
            if not self._dynamo_in_use:
                self._dynamo_in_use = True
                if self._watch is not None:
                    self._watch.disable()
                if self._recorder is not None:
                    self._recorder.note("torch.compile is used: CPU fallbacks are counted "
                                        "exactly but not placed at their call sites (dynamo "
                                        "would compile the call watcher into its graphs)")
            return original(*args, **kwargs)

        torch.compile = compile_
        self._patched.append((torch, original))

    def thread_started(self) -> None:
        """A thread that will run the program's steps started (a device thread of a spawned
        worker): open the warm-up watch window in it."""
        if self._watch is not None and self._recorder is not None and \
                self._recorder.next_index < WATCH_WARMUP_STEPS and not self._dynamo_in_use:
            self._watch.enable()

    def thread_finished(self) -> None:
        if self._watch is not None:
            self._watch.disable()

    def _executions(self) -> int:
        if self._met is None:
            return 0
        return sum(int(d[0]) for d in (self._met.metric_data(n) for n in _EXECUTE_METRICS)
                   if d)

    def _on_read(self, stack: Stack, payload: Sync, seconds: float, executions: int) -> None:
        if self._recorder is not None:
            self._reads_this_step += 1
            self._recorder.event("sync", seconds=seconds, stack=stack, payload=payload,
                                 value=executions)

    def stop(self) -> None:
        if self._spawn is not None:
            self._spawn.uninstall()
            self._spawn = None
        for module, original in reversed(self._patched):
            if getattr(original, "__name__", "") == "compile":
                module.compile = original
            else:
                module.sync = original
        self._patched = []
        if self._reads is not None:
            self._reads.uninstall()
            self._reads = None
        if self._watch is not None:
            self._watch.disable()
        if self._ir_debug_saved is not None:
            import torch_xla

            torch_xla._XLAC._set_ir_debug(self._ir_debug_saved)
            self._ir_debug_saved = None
        if self._recorder is None or self._last is None:
            return
        self._release_held()
        try:
            import torch_xla

            if torch_xla._XLAC._xla_runtime_is_initialized():
                import torch_xla.core.xla_model as xm

                xm.wait_device_ops()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        values, active = self._collect_step(everything=True)
        if active:
            self._recorder.finish_tail(values)
        try:  # torch_xla's own count of the same run, for the report to set beside lazyscope's
            end = runtime_counts(self._met)
            self._recorder.set_info(runtime_counts={
                k: n - self._runtime_base.get(k, 0) for k, n in end.items()
                if n - self._runtime_base.get(k, 0)})
        except Exception:  # noqa: BLE001 - descriptive only
            pass
        self._watch = None
        self._recorder = None

    def _on_barrier(self) -> None:
        self._in_barrier = True
        try:
            values, _ = self._collect_step()
            if not self._device_noted:
                self._note_device()
            if not self._eager_seen and self._eager_mode():
                self._eager_seen = True
                assert self._recorder is not None
                self._recorder.set_info(eager_mode=True)
        finally:
            self._in_barrier = False
        assert self._recorder is not None
        self._recorder.step(values)

    def _note_device(self) -> None:
        """Record the real device once the program has created it."""
        if self._device_noted or self._recorder is None:
            return
        self._device_noted = True
        try:
            import torch_xla
            import torch_xla.runtime as xr

            if not torch_xla._XLAC._xla_runtime_is_initialized():
                return
            devices = torch_xla.real_devices()
            info: dict[str, Any] = {"devices": len(devices)}
            if xr.is_spmd():
                info["spmd"] = True
                info["global_devices"] = n = xr.global_runtime_device_count()
                self._recorder.note(
                    f"SPMD: one program over {n} devices; each execution of a graph over "
                    "them counts once (torch_xla's ExecuteReplicatedTime), as torch_xla counts "
                    "it")
            meta = self._recorder.meta
            meta.device = f"{torch_xla.device()} ({devices[0]})" + (
                f", {len(devices)} devices" if len(devices) > 1 else "")
            self._recorder.set_info(**info)
        except Exception:  # noqa: BLE001 - descriptive only
            pass

    def _collect_step(self, everything: bool = False) -> tuple[dict[str, float | None], bool]:
        assert self._recorder is not None and self._last is not None
        now = time.perf_counter()
        values, samples, fallbacks = self._last.take(everything)
        wall = now - self._t_last
        self._t_last = now
        compiles = values["compile_count"]
        if compiles:
            self._compile_events(compiles, samples)
        fallbacks.pop(SCALAR_READ_OP, None)
        for op, n in fallbacks.items():
            self._recorder.event("fallback_exec", payload=FallbackExec(op), value=n)
        transfers = values["from_device_count"]
        self._watch_results(fallbacks, transfers)
        if compiles or self._ir_on:
            self._next_source_lines(compiles > 0)
        values["wall_s"] = wall
        values["t_end_s"] = now - self._recorder.t0
        values["fallback_count"] = sum(fallbacks.values())
        active = bool(compiles or values["execute_count"] or values["to_device_count"] or
                      transfers or fallbacks)
        return values, active

    def _compile_events(self, count: int, samples: list[tuple[float, float]]) -> None:
        """Turn the new PT_XLA_DEBUG compilation blocks into events of this step."""
        if count <= 0 or self._debug is None or self._recorder is None:
            return
        records = [r for r in self._debug.read_new() if r.kind == "compile"]
        graphs = self._graphs
        modules = graphs.take_new() if graphs is not None else []
        if not records:
            self._module_events(modules, samples, count)
            return
        paired = pair_modules([r.num_inputs for r in records], modules)
        # torch_xla keeps the last XLA_METRICS_SAMPLES samples: the newest ones are this step's
        kept = [v / 1e9 for _, v in samples[-len(records):]] if records else []
        seconds = [None] * (len(records) - len(kept)) + kept
        for rec, graph, secs in zip(records, paired, seconds, strict=True):
            frames = [make_frame(f.file, f.line, f.function) for f in rec.frames
                      if not is_lazyscope_file(f.file)]
            cause_kind, cause, owner = classify_compile(frames)
            hlo_file = (graphs.keep_text(graph, rec.graph_hash)
                        if graphs is not None and graph is not None else None)
            payload = Compile(
                phase="graph", cause=cause, cause_kind=cause_kind, owner=owner,
                num_inputs=rec.num_inputs, num_outputs=rec.num_outputs, hlo_file=hlo_file)
            if graph is not None:
                graph.fill(payload)
            stack = bound_stack(frames)
            if not self._hold_blind(payload, secs or 0.0, stack, rec.graph_hash):
                self._recorder.event("compile", seconds=secs or 0.0, stack=stack,
                                     payload=payload, key=rec.graph_hash)
        for module in modules:  # the kept ones were moved into the run: the rest go
            assert graphs is not None
            graphs.discard(module)

    def _module_events(self, modules: list[Any], samples: list[tuple[float, float]],
                       count: int) -> None:
        """Compilations torch_xla wrote no analysis for (a worker of local rank > 0, eager
        mode): one event per dumped module, keyed by its content digest, with no frames."""
        assert self._recorder is not None
        graphs = self._graphs
        if self._eager_mode():
            # each op is its own graph, compiled once: counted per step, not analysed as
            # recompilations (the verdict speaks of eager mode)
            if not self._eager_seen:
                self._eager_seen = True
                self._recorder.set_info(eager_mode=True)
            modules = [] if graphs is None else modules
            for module in modules:
                graphs.discard(module)  # type: ignore[union-attr]
            return
        kept = [v / 1e9 for _, v in samples[-len(modules):]] if modules else []
        seconds = [None] * (len(modules) - len(kept)) + kept
        why = "torch_xla writes its compilation analysis on local rank 0 only"
        for module, secs in zip(modules[-count:] if count else [], seconds[-count:] if count
                                else [], strict=True):
            payload = Compile(phase="graph", cause=f"unknown ({why})", cause_kind="other",
                              num_inputs=module.num_params)
            module.fill(payload)
            key = f"hlo:{module.digest}"
            if graphs is not None:
                payload.hlo_file = graphs.keep_text(module, key.replace(":", "-"))
            self._recorder.event("compile", seconds=secs or 0.0, payload=payload, key=key)
        if graphs is not None:
            for module in modules:
                graphs.discard(module)

    def _eager_mode(self) -> bool:
        try:
            return bool(self._use_eager_mode())
        except Exception:  # noqa: BLE001 - no such binding: not eager
            return False

    # -- the watch window ----------------------------------------------------------------
    def _watch_results(self, fallbacks: dict[str, int], transfers: int) -> None:
        """Record what the window attributed this step; decide whether the next step is
        watched (warm-up, or something this step did that has no site yet)."""
        watch, recorder = self._watch, self._recorder
        if watch is None or recorder is None:
            return
        if not fallbacks and transfers <= self._reads_this_step and not watch.hits and \
                not watch.active and recorder.next_index + 1 >= WATCH_WARMUP_STEPS:
            self._reads_this_step = 0  # a steady step with nothing to explain: the fast path
            return
        explained = 0
        for hit in watch.take():
            self._record_hit(hit)
            if hit.kind == "fallback":
                self._sited.add(op_base(hit.what))
            explained += hit.calls
        reads, self._reads_this_step = self._reads_this_step, 0
        unsited = {op_base(op) for op in fallbacks} - self._sited
        unexplained = transfers > reads + explained + sum(fallbacks.values()) and \
            self._transfer_windows < MAX_TRANSFER_WINDOWS
        watch.disable()
        if self._dynamo_in_use:
            return
        if recorder.next_index + 1 < WATCH_WARMUP_STEPS or unsited:
            watch.enable()
        elif unexplained and recorder.next_index + 1 >= WATCH_WARMUP_STEPS:
            self._transfer_windows += 1
            watch.enable()

    def _record_hit(self, hit: Hit) -> None:
        assert self._recorder is not None
        if hit.kind == "fallback":
            self._recorder.event("fallback", seconds=hit.seconds, stack=hit.stack,
                                 payload=Fallback(op=hit.what, via=hit.via,
                                                  backward=hit.backward), value=hit.calls)
        else:
            self._recorder.event("sync", seconds=hit.seconds, stack=hit.stack,
                                 payload=Sync(read=f"inside {hit.what} (the op reads a value "
                                                   "on the host)", closure=hit.closure,
                                              owner=hit.owner),
                                 value=0)

    # -- profiler window (lazyscope trace --profile) -----------------------------------
    def start_profile(self, logdir: Path) -> None:
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


def dump_dir_owner_alive(path: str | os.PathLike[str]) -> bool:
    """Whether the lazyscope process that made dump directory ``path`` still runs (its name
    carries that pid); a name without a pid counts as alive (never ours to remove)."""
    pid = os.path.basename(path)[len(DUMP_PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but not ours to signal: alive
        return True
    return True


def sweep_stale_dump_dirs(base: str) -> None:
    """Remove dump directories of lazyscope processes that no longer run (a SIGKILLed trace
    cannot remove its own)."""
    for path in glob.glob(os.path.join(glob.escape(base), DUMP_PREFIX + "*")):
        if not dump_dir_owner_alive(path):
            shutil.rmtree(path, ignore_errors=True)


def remove_dump_flag(xla_flags: str) -> str:
    """``XLA_FLAGS`` without its ``--xla_dump_to``."""
    try:
        words = shlex.split(xla_flags)
    except ValueError:
        words = xla_flags.split()
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith(DUMP_FLAG + "="):
            continue
        if word == DUMP_FLAG:
            skip = True
            continue
        out.append(word)
    return " ".join(shlex.quote(w) for w in out)


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
