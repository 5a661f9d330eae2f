"""Trace every worker of ``torch_xla.launch`` / ``xmp.spawn`` into ``RUN/rank<N>/``.

torch_xla 2.9 starts its workers with a ``ProcessPoolExecutor`` (``spawn`` start method) whose
task is ``torch_xla._internal.pjrt._run_thread_per_device(local_rank, local_world_size, fn,
initializer_fn)`` (``_internal/pjrt.py``, ``run_multiprocess``); the initializer creates the
worker's XLA client, then ``fn`` runs in one thread per device of the process. While a trace is
active in the parent, that module attribute is replaced by a picklable :class:`TracedWorker`,
which in the worker process, before the client exists:

* points the worker's torch_xla environment at its own rank directory (``PT_XLA_DEBUG_FILE``,
  its own HLO dump directory);
* opens the parent's tracer (``Collector.worker_tracer``, the runner's Tracer) on ``RUN/rank<local_rank>`` with the parent's
  options, runs the real worker inside it, and closes it however the worker ends.

The parent run records the ranks it spawned (``meta.info["ranks"]``); ``lazyscope report RUN``
merges them. ``nprocs=1`` runs ``fn`` in the parent itself (no worker): the parent's own trace
records it.

Only one thread of a process records steps (the first that reaches a barrier): with several
devices per process (threads), torch_xla's metrics are per process, so one thread's barriers
delimit the process's steps; the other threads' barriers are not steps of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lazyscope.backends.base import active
from lazyscope.store import rank_dir, rank_dirs


class TracedWorker:
    """Picklable stand-in for ``pjrt._run_thread_per_device`` (see the module docstring)."""

    def __init__(self, run_dir: str, options: Any, target: str, target_kind: str,
                 args: list[str], real: Any, tracer: Any):
        self.run_dir = run_dir
        #: what traces a worker (the parent's Tracer class: pickled by reference)
        self.tracer = tracer
        self.options = options
        self.target = target
        self.target_kind = target_kind
        self.args = args
        self.real = real

    def __getstate__(self) -> dict[str, Any]:
        # the real worker is pickled by name, and in this process the name is this object:
        # the worker process imports torch_xla afresh and finds the real one there
        return {**self.__dict__, "real": None}

    def __call__(self, local_rank: int, local_world_size: int, fn: Any,
                 initializer_fn: Any) -> Any:
        real = self.real
        if real is None:
            from torch_xla._internal import pjrt

            real = pjrt._run_thread_per_device
        out = rank_dir(self.run_dir, local_rank)
        tracer = self.tracer(out, options=self.options, force=True, target=self.target,
                        target_kind=self.target_kind, args=self.args, rank=local_rank,
                        world_size=local_world_size)
        results: Any = None
        with tracer:
            results = real(local_rank, local_world_size, _InDeviceThread(fn), initializer_fn)
        if results is None:  # stopped by --steps (the tracer ends it ok): fn returned nothing
            results = _no_results()
        return results


def _no_results() -> dict[int, None]:
    """What ``_run_thread_per_device`` returns when ``fn`` returned None on every device of this
    process: ``{device ordinal: None}`` (spawn merges these dicts and needs one entry per
    device). The runtime exists by now: the worker ran."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    return {torch_xla._XLAC._xla_get_device_ordinal(d): None
            for d in xm.get_xla_supported_devices()}


class _InDeviceThread:
    """Runs the worker's function in its device thread with the trace's per-thread hooks on
    (the watch window of warm-up), and off again when it returns."""

    def __init__(self, fn: Any):
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        trace = active()
        hook = getattr(trace.collector, "thread_started", None) if trace else None
        done = getattr(trace.collector, "thread_finished", None) if trace else None
        if hook is not None:
            hook()
        try:
            return self.fn(*args, **kwargs)
        finally:
            if done is not None:
                done()


class SpawnHook:
    """Installs :class:`TracedWorker` for the duration of a parent's trace."""

    def __init__(self, run_dir: Path, options: Any, recorder: Any, tracer: Any):
        self.run_dir = run_dir
        self.tracer = tracer
        self.options = options
        self.recorder = recorder
        self._saved: Any = None

    def install(self) -> None:
        try:
            from torch_xla._internal import pjrt
        except ImportError:  # pragma: no cover - a torch_xla without it
            return
        real = getattr(pjrt, "_run_thread_per_device", None)
        if real is None or isinstance(real, TracedWorker):
            return
        meta = self.recorder.meta
        pjrt._run_thread_per_device = TracedWorker(
            str(self.run_dir.resolve()), self.options, meta.target, meta.target_kind,
            list(meta.args), real, self.tracer)
        self._saved = real

    def uninstall(self) -> None:
        if self._saved is None:
            return
        from torch_xla._internal import pjrt

        pjrt._run_thread_per_device = self._saved
        self._saved = None
        ranks = list(rank_dirs(self.run_dir))
        if ranks:
            self.recorder.set_run_info(ranks=ranks)
