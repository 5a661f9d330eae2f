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
* Compilation causes, graph hashes and Python frames come from ``PT_XLA_DEBUG_LEVEL=2`` with
  ``PT_XLA_DEBUG_FILE`` in the run directory; each graph's inputs and op counts from XLA's HLO
  dump (``hlo.py``), written at compile time only. At level 2 torch_xla also writes a block per
  execution with the graph's hash: a barrier marks how far the file has grown, and the text is
  read every few dozen barriers (or at once when something compiled) and cut at the marks (a
  steady step's blocks are counted, not parsed); they become ``execute`` events (graph, step,
  executions) at the step whose barrier saw them written, which tell a graph
  compiled once and reused from graphs made and thrown away. torch_xla writes these blocks on
  local rank 0 only and not in eager mode: there, executions per graph are unknown.
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

import dataclasses
import functools
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lazyscope.backends.base import Collector, Recorder, TraceOptions
from lazyscope.backends.compile_cache import XlaCache
from lazyscope.backends.sampler import mark
from lazyscope.backends.xla.barrier import barrier_site
from lazyscope.backends.xla.causes import classify_compile
from lazyscope.backends.xla.debugfile import (
    DebugFileReader,
    DebugRecord,
    graph_memory,
    parse_debug_text,
)
from lazyscope.backends.xla.hlo import HloDumpReader, pair_modules
from lazyscope.backends.xla.irlines import SourceLines, lower_pending
from lazyscope.backends.xla.metrics import EXECUTE_METRICS, Metrics, runtime_counts
from lazyscope.backends.xla.reads import ValueReadHooks
from lazyscope.backends.xla.session import XlaSession, session
from lazyscope.backends.xla.spawn import SpawnHook
from lazyscope.backends.xla.watch import SCALAR_READ_OP, CallWatch, Counters, Hit, op_base
from lazyscope.core.errors import MissingDependencyError
from lazyscope.model import (
    EVENT_KINDS,
    OWNER_USER,
    STEP_FIELDS,
    Capabilities,
    Compile,
    Fallback,
    FallbackExec,
    Stack,
    Sync,
)
from lazyscope.model.ownership import bound_stack, is_lazyscope_file, make_frame
from lazyscope.store.layout import DEBUG_FILE, GRAPHS_DIR

#: how much of torch_xla's debug output a run keeps in full (then its compilation analyses)
DEBUG_KEEP_BYTES = 4 << 20
INSTALL_HINT = (
    "torch_xla is not installed: pip install 'lazyscope[xla]' "
    "(torch==2.9.0 torch_xla==2.9.0), or use --backend eager"
)
#: the longest the execution blocks of marked barriers wait to be read (seconds)
DEBUG_READ_S = 2.0
#: warm-up steps in which the watch window is open
WATCH_WARMUP_STEPS = 2
#: barriers that lower their pending graph per run (no HLO dump: see XlaCollector._lower_due)
MAX_LOWERINGS = 256
#: times the window reopens for device-to-host transfers nobody explained (bounded: some
#: transfers happen outside any torch call, e.g. inside xm.mesh_reduce)
MAX_TRANSFER_WINDOWS = 3

# --------------------------------------------------------------------------- collector


class _SyncPatch:
    """``torch_xla.sync`` is wrapped once per process, in the package and in the
    ``torch_xla.torch_xla`` submodule (which ``torch_xla.step()`` and ``torch_xla.compile`` call),
    and never unwrapped: the wrapper hands each call to the collector tracing now
    (:attr:`current`), and calls straight through when there is none. So a ``sync`` a program
    bound during one trace (``from torch_xla import sync``) still works after it, and in the
    next one; in a forked child it calls straight through. (The package attribute
    ``torch_xla.torch_xla`` is the package itself: ``from .torch_xla import *`` re-exports the
    submodule's ``torch_xla`` name, so the submodule is only reachable through
    ``sys.modules``.)"""

    current: XlaCollector | None = None
    original: Any = None

    @classmethod
    def install(cls, torch_xla: Any) -> None:
        if cls.original is not None:
            return
        submodule = sys.modules["torch_xla.torch_xla"]
        original = cls.original = submodule.sync

        @functools.wraps(original)
        def sync(*args: Any, **kwargs: Any) -> Any:
            collector = cls.current
            if collector is None:
                return original(*args, **kwargs)
            return collector._sync(original, *args, **kwargs)

        mark(sync, "barrier")

        for module in (torch_xla, submodule):
            module.sync = sync



class XlaCollector(Collector):
    """Collects a torch_xla program (see the module docstring)."""

    name = "xla"
    install_hint = INSTALL_HINT
    supports_profile = True

    def __init__(self, options: TraceOptions, *, worker_tracer: Any = None):
        super().__init__(options, worker_tracer=worker_tracer)
        self._recorder: Recorder | None = None
        self._met: Any = None
        self._last: Metrics | None = None
        self._runtime_base: dict[str, int] = {}
        self._cache: XlaCache | None = None
        #: the source of the last program barrier (see barrier_source)
        self._last_barrier = ""
        self._t_last = 0.0
        self._debug: DebugFileReader | None = None
        self._in_barrier = False
        #: the root TraceMe of the step now in a profile window (profile_step)
        self._step_marker: Any = None
        self._graphs: HloDumpReader | None = None
        self._reads: ValueReadHooks | None = None
        self._watch: CallWatch | None = None
        self._sited: set[str] = set()
        self._transfer_windows = 0
        #: (owner, attribute, original) of what the trace wraps, restored at its end
        self._patched: list[tuple[Any, str, Any]] = []
        self._device_noted = False
        #: the run's info says eager mode (set once)
        self._eager_seen = False
        self._use_eager_mode: Any = bool
        self._reads_this_step = 0
        #: the thread whose barriers are steps (the first to reach one)
        self._step_thread: int | None = None
        self._spawn: Any = None
        #: the program uses torch.compile: the watch window stays closed (dynamo would trace
        #: its torch function mode and specialise graphs on it, then recompile without it)
        self._dynamo_in_use = False
        #: the user lines of graph ops: IR debug switching, held compile events
        self._lines = SourceLines()
        self._session: XlaSession | None = None
        self._debug_kept = 0
        #: the steps whose barriers marked the debug file since it was last read, and when
        self._debug_steps: list[int] = []
        self._debug_read = 0.0
        #: the device's memory at each barrier (TPU: xm.get_memory_info), read only once the
        #: program has started the runtime; None until known whether the runtime reports it
        self._memory_device: str | None = None
        self._memory_used: list[int] = []
        self._memory_peak: int | None = None
        self._memory_limit: int | None = None
        #: graph hashes this trace compiled or saw run; whether torch_xla's cache held graphs
        #: from before the trace (see _cached_graphs)
        self._met_graphs: set[str] = set()
        self._foreign = False
        #: where XLA writes no HLO dump: the graph a barrier lowered before its sync, the
        #: compile events held until a later barrier gives their shapes, lowerings so far
        self._lowered: Any = None
        self._unshaped: list[tuple[Compile, float, Stack, str, int]] = []
        self._lowerings = 0

    def capabilities(self) -> Capabilities:
        return Capabilities(step_fields=list(STEP_FIELDS), lazy=True,
                            events=[k for k in EVENT_KINDS
                                    if k not in ("graph_break", "eager_fallback")])

    # -- availability and environment -------------------------------------------------
    def check_available(self) -> None:
        if importlib.util.find_spec("torch_xla") is None:
            raise MissingDependencyError(INSTALL_HINT)

    def prepare_env(self, run_dir: Path) -> None:
        """The process's XLA session (environment, debug file, dump directory): made by the
        first trace of the process, shared by later ones (``session.py``)."""
        self._session = session(self.options.graph_shapes)

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
        sess = self._session or session(self.options.graph_shapes)
        self._session = sess
        sess.traces += 1
        self._debug = sess.debug
        # what was written before this trace (between traces): not this run's, but the graphs
        # it compiled are in torch_xla's cache, and this trace may run them without compiling
        untraced, _ = self._debug.take()
        if sess.late:
            recorder.meta.capabilities.unmeasured.append(
                "compile causes and sites: torch_xla had compiled before this trace began (it "
                "reads its debug settings once per process, at its first compilation), so its "
                "compilations are counted but not explained; enter lazyscope.trace() before the "
                "program's first torch_xla.sync()")
        elif sess.traces > 1:
            recorder.note("an earlier trace ran in this process: graphs it compiled are reused "
                          "from torch_xla's cache here, not compiled again")
        if sess.dump is not None and self.options.graph_shapes:
            self._graphs = HloDumpReader(sess.dump, owned=sess.dump_owned,
                                         keep_dir=recorder.writer.io_path() / GRAPHS_DIR)
        self._learn_untraced([r for r in untraced if r.kind == "compile"])
        self._met_graphs = set()
        # torch_xla's cache holds graphs compiled before this trace: each barrier that ran
        # something reads the debug file, to tell a graph the trace has not met yet
        self._foreign = bool(sess.graphs)
        self._last = Metrics(met, getattr(torch_xla._XLAC, "_xla_metric_data", None))
        self._use_eager_mode = getattr(torch_xla._XLAC, "_get_use_eager_mode", bool)
        self._runtime_base = runtime_counts(met)
        self._cache = XlaCache(met)
        self._t_last = time.perf_counter()
        _SyncPatch.install(torch_xla)
        _SyncPatch.current = self
        self._reads = ValueReadHooks(self._on_read, self._executions,
                                     span=lambda: self.span("lazyscope: host read")
                                     if self.profiling else None)
        self._reads.install()
        self._watch = CallWatch(Counters(met))
        self._watch.enable()  # warm-up: watch every call
        self._watch_for_dynamo()
        self._watch_parallel_loader()
        self._lines.start(torch_xla._XLAC, self.options.graph_shapes)
        if recorder.meta.rank is None:  # a worker never spawns ranks of its own
            self._spawn = SpawnHook(recorder.writer.path, self.options, recorder,
                                    self.worker_tracer)
            self._spawn.install()

    def _learn_untraced(self, records: list[DebugRecord]) -> None:
        """The graphs compiled in this process before this trace and after the last one (their
        compilation blocks, paired with their dumped modules), into the session's graphs; the
        dumped modules are discarded."""
        sess, graphs = self._session, self._graphs
        if sess is None:
            return
        if graphs is not None and not graphs.owned:
            # the user's own dump directory keeps every module an earlier trace read: the
            # untraced ones cannot be told from them, so they are learnt without shapes
            graphs.skip_existing()
        modules = graphs.take_new() if graphs is not None and graphs.owned else []
        paired = pair_modules([r.num_inputs for r in records], modules) if records else []
        for rec, module in zip(records, paired, strict=True):
            frames = [make_frame(f.file, f.line, f.function) for f in rec.frames
                      if not is_lazyscope_file(f.file)]
            cause_kind, cause, owner = classify_compile(frames)
            payload = Compile(phase="graph", cause=cause, cause_kind=cause_kind, owner=owner,
                              num_inputs=rec.num_inputs, num_outputs=rec.num_outputs,
                              memory=graph_memory(rec.sizes_gb))
            if module is not None:
                module.fill(payload)
            if rec.graph_hash:
                sess.graphs[rec.graph_hash] = (payload, bound_stack(frames))
        for module in modules:
            assert graphs is not None
            graphs.discard(module)

    def _cached_graphs(self, step: int | None, executed: dict[str, int]) -> None:
        """Graphs that ran in a step without this trace having compiled or met them: torch_xla
        found them in its in-process cache (compiled earlier in the process). Each is a
        ``cached`` event, the graph as it was compiled then, at the user frames that ran it now
        (its execution block), so that a graph new to the trace counts whether it was compiled
        now or earlier (a test's verdict does not depend on the tests before it)."""
        recorder, debug, sess = self._recorder, self._debug, self._session
        new = [g for g in executed if g not in self._met_graphs]
        if not new or recorder is None or debug is None or sess is None:
            return
        self._met_graphs.update(new)
        blocks = {r.graph_hash: r for r in parse_debug_text(
            debug.consumed.decode("utf-8", "replace"))[0] if r.kind == "execute"}
        for graph in new:
            rec = blocks.get(graph)
            frames = [make_frame(f.file, f.line, f.function) for f in rec.frames
                      if not is_lazyscope_file(f.file)] if rec is not None else []
            known = sess.graphs.get(graph)
            if known is not None:
                payload = dataclasses.replace(known[0])
                stack = bound_stack(frames) if frames else known[1]
            else:  # compiled before lazyscope's session: only what the execution says
                cause_kind, cause, owner = classify_compile(frames)
                payload = Compile(phase="graph", cause=cause, cause_kind=cause_kind,
                                  owner=owner, num_inputs=rec.num_inputs if rec else None)
                stack = bound_stack(frames)
            if payload.owner == OWNER_USER:
                recorder.event("cached", stack=stack, payload=payload, key=graph, step=step)

    @property
    def untraced_sync(self) -> Any:
        """torch_xla's own ``sync``, as the program would call it untraced (None before the
        trace started): what a benchmark times lazyscope's barrier against."""
        return _SyncPatch.original

    def _sync(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        """``torch_xla.sync`` while this collector traces (see :class:`_SyncPatch`)."""
        if self._in_barrier or self._recorder is None or self._recorder.forgotten:
            return original(*args, **kwargs)
        thread = threading.get_ident()
        barrier, source = barrier_site(2)
        previous = self._last_barrier
        if barrier:
            # The parallel loader syncs before each batch unless a StepTrace just marked
            # the step (torch_xla's own rule). A loop that marks its steps itself
            # (torch_xla.compile'd step, torch_xla.step(), xm.mark_step()) over the loader
            # would get two barriers per iteration: the loader's sync right after the
            # program's own barrier ends no step of its own (its work goes to the next).
            if source == "loader" and previous == "own":
                barrier, source = False, "merged"
            self._last_barrier = source
        if barrier and self._step_thread is None:
            self._step_thread = thread
        if barrier and thread == self._step_thread and self.step_gate is not None:
            barrier = self.step_gate()  # a trainer's callback says which barriers end steps
        recorder = self._recorder
        if self._cache is not None and self._cache.info is None:
            self._cache.first_use()  # the cache as the program set it up, before it compiles
        t_enter = time.perf_counter()
        if self._lines.held and barrier and thread == self._step_thread:
            self._in_barrier = True
            try:
                self._lines.probe()
                self._lines.release(self._recorder)
            finally:
                self._in_barrier = False
        if barrier and thread == self._step_thread and self._lower_due():
            self._in_barrier = True
            try:
                self._lowerings += 1
                self._lowered = lower_pending()
            finally:
                self._in_barrier = False
        t0 = time.perf_counter()
        if self.profiling and thread == self._step_thread:
            with self.span("lazyscope: step barrier (graph collection, compile, device wait)"
                           if barrier else "lazyscope: torch_xla sync"):
                result = original(*args, **kwargs)
        else:
            result = original(*args, **kwargs)
        t1 = time.perf_counter()
        if barrier and thread == self._step_thread and self._recorder is not None:
            recorder.add_time("own_s", t0 - t_enter)
            if previous == "steptrace" and source == "own" and self._launched_nothing():
                # The program's own torch_xla.sync() right after an xp.StepTrace's exit (a
                # sync inside a StepTrace is refused by torch_xla), and it ran nothing: one
                # iteration, one step (its time goes to the next barrier's step)
                self._last_barrier = "merged"
                recorder.add_time("barrier_s", t1 - t0)
            else:
                self._on_barrier(t1 - t0)
        elif recorder is not None and not barrier:
            # torch_xla's own sync (a merged loader barrier, the dynamo bridge): the program's
            # thread waited there as at a barrier
            recorder.add_time("barrier_s", t1 - t0)
        return result

    def _lower_due(self) -> bool:
        """Whether this barrier lowers the graph it is about to run (XLA writes no HLO dump in
        this process: the program started the runtime before lazyscope set XLA_FLAGS): in
        warm-up, after a step that compiled, and while a graph compiled without its shapes
        waits for them; at most MAX_LOWERINGS a run. A steady step lowers nothing."""
        sess, recorder = self._session, self._recorder
        if sess is None or recorder is None or not sess.dump_dead or sess.late or \
                not self.options.graph_shapes or self._lowerings >= MAX_LOWERINGS:
            return False
        return bool(recorder.next_index < WATCH_WARMUP_STEPS or self._unshaped
                    or recorder.last_values.get("compile_count"))

    def _shape_held(self, executed: dict[str, int]) -> None:
        """The graphs held without shapes take the ones of the graph this barrier lowered and
        ran without compiling it (the same graph: its hash is theirs); then they are
        recorded, in the steps they were compiled in."""
        held, self._unshaped = self._unshaped, []
        lowered = self._lowered
        if self._recorder is None:
            return
        for payload, seconds, stack, key, step in held:
            if lowered is not None and key in executed and \
                    len(lowered.inputs) == payload.num_inputs:
                lowered.fill(payload)
                lowered = None
            self._recorder.event("compile", seconds=seconds, stack=stack, payload=payload,
                                 key=key, step=step)

    def _launched_nothing(self) -> bool:
        """Whether the sync that just returned launched no execution (nor compilation):
        torch_xla wrote nothing to its debug file, where it writes a block for each (at
        level 2, on local rank 0, not in eager mode; elsewhere: not known, False)."""
        debug, sess = self._debug, self._session
        if debug is None or sess is None or sess.late or self.step_gate is not None or \
                os.environ.get("PJRT_LOCAL_PROCESS_RANK", "0") != "0" or self._eager_mode():
            return False
        return not debug.grew()

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
        self._patched.append((torch, "compile", original))

    def _watch_parallel_loader(self) -> None:
        """Time the program's wait for its next batch from torch_xla's parallel loader
        (``MpDeviceLoader``): its thread fetches and uploads batches; the program's thread waits
        in ``ParallelLoader.next_item`` (the step's ``input_s``; the loader's own
        ``torch_xla.sync()`` before it is a barrier, timed there). Importing the module starts
        no runtime."""
        import torch_xla.distributed.parallel_loader as pl

        original = pl.ParallelLoader.__dict__["next_item"]

        seen = [False]

        @functools.wraps(original)
        def next_item(loader: Any, device: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(loader, device)
            finally:
                recorder = self._recorder
                if recorder is not None:
                    recorder.add_time("input_s", time.perf_counter() - t0)
                    if not seen[0]:
                        seen[0] = True
                        recorder.set_run_info(parallel_loader=True)

        pl.ParallelLoader.next_item = mark(next_item, "input")
        self._patched.append((pl.ParallelLoader, "next_item", original))

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
        return sum(int(d[0]) for d in (self._met.metric_data(n) for n in EXECUTE_METRICS)
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
        if _SyncPatch.current is self:
            _SyncPatch.current = None
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched = []
        if self._reads is not None:
            self._reads.uninstall()
            self._reads = None
        if self._watch is not None:
            self._watch.disable()
        if self._lines.saved is not None:
            import torch_xla

            self._lines.stop(torch_xla._XLAC)
        if self._recorder is None or self._last is None:
            return
        self._lines.release(self._recorder)
        try:
            import torch_xla

            if torch_xla._XLAC._xla_runtime_is_initialized():
                import torch_xla.core.xla_model as xm

                xm.wait_device_ops()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        values, active = self._collect_step(everything=True)
        if self._unshaped:
            self._shape_held({})
        if active:
            self._recorder.finish_tail(values)
        if self._memory_used:
            self._recorder.set_run_info(device_memory={
                "source": "torch_xla get_memory_info", "used": self._memory_used,
                "peak": self._memory_peak, "limit": self._memory_limit})
        try:  # the persistent cache: what the program configured, what it did
            self._recorder.set_run_info(compile_cache=self._cache.result())
        except Exception:  # noqa: BLE001 - descriptive only
            pass
        try:  # torch_xla's own count of the same run, for the report to set beside lazyscope's
            end = runtime_counts(self._met)
            self._recorder.set_run_info(runtime_counts={
                k: n - self._runtime_base.get(k, 0) for k, n in end.items()
                if n - self._runtime_base.get(k, 0)})
        except Exception:  # noqa: BLE001 - descriptive only
            pass
        self._watch = None
        self._recorder = None

    def _on_barrier(self, barrier_s: float) -> None:
        """A step barrier returned after ``barrier_s`` inside torch_xla's sync: record the step.
        What lazyscope does from the step's end on is its own time, counted in the next step."""
        self._in_barrier = True
        try:
            values, _ = self._collect_step()
            values["barrier_s"] = barrier_s
            if not self._device_noted:
                self._note_device()
            self._sample_memory()
            if not self._eager_seen and self._eager_mode():
                self._eager_seen = True
                assert self._recorder is not None
                self._recorder.set_run_info(eager_mode=True)
        finally:
            self._in_barrier = False
        recorder = self._recorder
        assert recorder is not None
        if self.profiling:
            self._mark_step(recorder.next_index, values)
        try:
            recorder.step(values)
        finally:
            recorder.add_time("own_s", time.perf_counter() - self._t_last)

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
            if xr.is_spmd():
                n = int(xr.global_runtime_device_count())
                self._recorder.set_run_info(devices=len(devices), spmd=True, global_devices=n)
                self._recorder.note(
                    f"SPMD: one program over {n} devices; each execution of a graph over "
                    "them counts once (torch_xla's ExecuteReplicatedTime), as torch_xla counts "
                    "it")
            else:
                self._recorder.set_run_info(devices=len(devices))
            meta = self._recorder.meta
            meta.device = f"{torch_xla.device()} ({devices[0]})" + (
                f", {len(devices)} devices" if len(devices) > 1 else "")
        except Exception:  # noqa: BLE001 - descriptive only
            pass

    def _sample_memory(self) -> None:
        """The device's memory now (``bytes_used``, ``peak_bytes_used``, ``bytes_limit``):
        torch_xla's allocator statistics, no device work and no transfer. XLA:CPU raises
        UNIMPLEMENTED: recorded once as not measured, never as 0."""
        if self._memory_device == "" or self._recorder is None:
            return
        try:
            import torch_xla

            if self._memory_device is None:
                if not torch_xla._XLAC._xla_runtime_is_initialized():
                    return  # the program has not started the runtime: not ours to start
                self._memory_device = str(torch_xla.device())
            info = torch_xla._XLAC._xla_memory_info(self._memory_device)
        except Exception as exc:  # noqa: BLE001 - the runtime cannot say (XLA:CPU)
            self._memory_device = ""
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            self._recorder.set_run_info(device_memory={
                "unmeasured": f"the runtime does not report device memory ({why})"})
            return
        self._memory_used.append(int(info.get("bytes_used", 0)))
        if "peak_bytes_used" in info:
            self._memory_peak = int(info["peak_bytes_used"])
        if "bytes_limit" in info:
            self._memory_limit = int(info["bytes_limit"])

    def _collect_step(self, everything: bool = False) -> tuple[dict[str, float | None], bool]:
        assert self._recorder is not None and self._last is not None
        now = time.perf_counter()
        values, samples, fallbacks = self._last.take(everything)
        wall = now - self._t_last
        self._t_last = now
        compiles = values["compile_count"]
        records = self._debug_records(now, compiles, everything,
                                      executed=bool(values.get("execute_count")))
        if compiles:
            self._compile_events(compiles, samples, records)
            if self._session is not None:
                # torch_xla has read its debug settings and XLA its flags: a child process
                # the program starts from now on does not inherit them
                self._session.restore_env()
        fallbacks.pop(SCALAR_READ_OP, None)
        for op, n in fallbacks.items():
            self._recorder.event("fallback_exec", payload=FallbackExec(op), value=n)
        transfers = values["from_device_count"]
        self._watch_results(fallbacks, transfers)
        if compiles or self._lines.on:
            import torch_xla

            self._lines.after_step(
                torch_xla._XLAC, compiled=compiles > 0,
                warm_up=self._recorder.next_index + 1 < WATCH_WARMUP_STEPS)
        self._lowered = None  # this barrier's (a held graph took its shapes, or none did)
        values["wall_s"] = wall
        values["t_end_s"] = now - self._recorder.t0
        values["fallback_count"] = sum(fallbacks.values())
        active = bool(compiles or values["execute_count"] or values["to_device_count"] or
                      transfers or fallbacks)
        return values, active

    def _debug_records(self, now: float, compiles: int, everything: bool,
                       executed: bool = False) -> list[DebugRecord]:
        """This step's compilation records from the debug file, read when due (see
        :class:`DebugFileReader`); the executions of each step it read become its ``execute``
        events. ``executed``: the step ran a graph (read now when torch_xla's cache holds
        graphs from before this trace: :meth:`_cached_graphs`)."""
        debug, recorder = self._debug, self._recorder
        if debug is None or recorder is None:
            return []
        if not (compiles or everything or debug.due() or now - self._debug_read >= DEBUG_READ_S
                or (executed and self._foreign) or self._unshaped):
            debug.mark()
            self._debug_steps.append(recorder.steps)
            return []
        self._debug_read = now
        parts = debug.take_steps()
        steps, self._debug_steps = self._debug_steps, []
        for step, (records, executed) in zip([*steps, None], parts, strict=True):
            self._met_graphs.update(r.graph_hash for r in records if r.kind == "compile")
            if self._foreign:
                self._cached_graphs(step, executed)
            self._met_graphs.update(executed)
            for graph, n in executed.items():
                recorder.event("execute", key=graph, value=n, step=step)
        if debug.consumed:
            # the run keeps what torch_xla wrote during it, up to DEBUG_KEEP_BYTES; past that
            # only its compilation analyses (execution blocks are 1-4 KB per execution)
            if self._debug_kept < DEBUG_KEEP_BYTES:
                self._debug_kept += len(debug.consumed)
                recorder.keep_text(DEBUG_FILE, debug.consumed.decode("utf-8", "replace"))
            elif debug.analysis:
                recorder.keep_text(DEBUG_FILE, debug.analysis)
        # a marked barrier had compiled nothing (or it would have been read then)
        if self._unshaped:
            # this barrier's graph is theirs only when it compiled nothing (else it is the new
            # graph's: they keep no shapes)
            self._shape_held({} if compiles else parts[-1][1])
        return parts[-1][0]

    def _compile_events(self, count: int, samples: list[tuple[float, float]],
                        records: list[DebugRecord]) -> None:
        """Turn this step's PT_XLA_DEBUG compilation blocks into events."""
        if count <= 0 or self._recorder is None:
            return
        records = [r for r in records if r.kind == "compile"]
        graphs = self._graphs
        # the modules dumped since the last barrier, in lazyscope's directory or the user's
        # (what was there before the trace was skipped when it began: _learn_untraced)
        modules = graphs.take_new() if graphs is not None else []
        if not records:
            self._module_events(modules, samples, count)
            return
        paired = pair_modules([r.num_inputs for r in records], modules)
        if records and not modules and self._session is not None and \
                self._session.dump is not None and self.options.graph_shapes:
            self._session.dump_dead = True  # XLA read its flags before lazyscope set them
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
                num_inputs=rec.num_inputs, num_outputs=rec.num_outputs, hlo_file=hlo_file,
                memory=graph_memory(rec.sizes_gb))
            lowered = self._lowered
            if graph is None and lowered is not None and owner == OWNER_USER and \
                    len(lowered.inputs) == rec.num_inputs and cause_kind == "barrier":
                graph, self._lowered = lowered, None  # the graph this barrier lowered
            if graph is not None:
                graph.fill(payload)
            stack = bound_stack(frames)
            if self._session is not None and rec.graph_hash and owner == OWNER_USER:
                self._session.graphs[rec.graph_hash] = (payload, stack)
            if graph is None and owner == OWNER_USER and self._session is not None and \
                    self._session.dump_dead and self.options.graph_shapes and \
                    self._lowerings < MAX_LOWERINGS:
                # no dump, and this barrier's graph was not lowered: held until the next
                # barrier lowers the graph it runs (the same one, when the new shape stays)
                self._unshaped.append((payload, secs or 0.0, stack, rec.graph_hash,
                                       self._recorder.steps))
            elif not self._lines.hold(payload, secs or 0.0, stack, rec.graph_hash,
                                      self._recorder.steps):
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
                self._recorder.set_run_info(eager_mode=True)
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
        self.profiling = True
        if self._recorder is not None:
            self._recorder.marker = self._mark_event

    def span(self, name: str) -> Any:
        """A raw TraceMe named ``name`` on the calling thread (not ``xp.Trace``: its IR scope
        makes a sync inside it raise "Expecting scope to be empty")."""
        import torch_xla

        return torch_xla._XLAC.profiler.TraceMe(name)

    def _mark_step(self, index: int, values: dict[str, float | None]) -> None:
        """The step that just ended, its time cut into parts, named in the profile at its
        barrier (XProf's words: input wait; tracing is the host's own work)."""
        recorder = self._recorder
        if recorder is None:
            return
        got = {**recorder.intervals(), **values}

        def ms(key: str) -> float:
            v = got.get(key)
            return float(v) * 1e3 if v is not None and v == v else 0.0

        compile_ms, barrier_ms = ms("compile_s"), ms("barrier_s")
        device_ms = max(barrier_ms - compile_ms, 0.0)
        tracing_ms = max(ms("wall_s") - ms("input_s") - barrier_ms - ms("sync_s")
                         - ms("own_s"), 0.0)
        with self.span(f"lazyscope: step {index}: input wait {ms('input_s'):.1f} ms, tracing "
                       f"{tracing_ms:.1f} ms, compile {compile_ms:.1f} ms, device wait "
                       f"{device_ms:.1f} ms, host reads {ms('sync_s'):.1f} ms"):
            pass

    def _mark_event(self, kind: str, stack: Stack | None, step: int) -> None:
        """An event lazyscope records while a profile is captured, named in it where it
        happened: ``lazyscope: compile train.py:42 (step 3)``."""
        if kind not in ("compile", "sync", "fallback", "fallback_exec"):
            return
        site = next((f for f in stack or () if not f.library), None)
        where = f" {os.path.basename(site.file)}:{site.line}" if site is not None else ""
        with self.span(f"lazyscope: {kind}{where} (step {step})"):
            pass

    def stop_profile(self) -> None:
        """Wait for pending device work, stop the capture and write
        ``logdir/plugins/profile/<timestamp>/*.xplane.pb``."""
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.profiler as xp

        xm.wait_device_ops()
        self.profiling = False
        if self._recorder is not None:
            self._recorder.marker = None
        xp.stop_trace()

    def profile_step(self, index: int | None) -> None:
        """End the step annotation now open; open ``lazyscope_step`` for step ``index``.

        XProf groups a host-only profile into steps by *root* TraceMe events (the ``_r`` stat):
        ``xp.StepTrace`` makes one per step, a loop of bare barriers none, and the overview
        page then says "No step marker observed". So when the program has not entered a
        StepTrace (``xp.get_tracer_marked_step()``), each step of the window gets a raw root
        TraceMe named ``lazyscope_step`` with its ``step_num``, opened and closed here, at the
        step barriers, on the step thread (TraceMe events are per thread). Not ``xp.Trace``:
        its IR scope makes the sync inside the step raise "Expecting scope to be empty". Step
        0 of a window that starts at 0 is not marked: before the program has run, whether it
        uses StepTrace is unknown, and two roots overlapping one step would confuse XProf."""
        marker, self._step_marker = self._step_marker, None
        if marker is not None:
            marker.__exit__(None, None, None)
        if index is None or index == 0:
            return
        import torch_xla
        import torch_xla.debug.profiler as xp

        if xp.get_tracer_marked_step():  # the program's StepTrace marks its steps
            return
        self._step_marker = torch_xla._XLAC.profiler.TraceMe("lazyscope_step", step_num=index,
                                                              _r=1)


