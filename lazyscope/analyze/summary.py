"""Totals and per-step statistics of a run, typed: what every view shows at the top.

A total a backend does not measure is None (``meta.capabilities``), never 0. Step-time
statistics are over the *steady* steps: the steps that compiled nothing (where compilations are
measured), or the steps from ``--warmup-steps N`` on when the user fixed the warm-up; with fewer
than :data:`MIN_STEADY_STEPS` of them, over every step (a median of one step is not the run's).
``Summary.median_step_steps`` says how many steps the median covers and ``median_step_basis``
which ones; ``lazyscope check --max-step-seconds`` judges the same steps (:func:`timed_steps`).
Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.tokens import measured_tokens
from lazyscope.core.units import counted
from lazyscope.model import Run, StepTable

#: fewer steady steps than this, and step-time statistics are over every step
MIN_STEADY_STEPS = 3


@dataclass
class Summary:
    target: str
    target_kind: str
    args: list[str]
    backend: str
    device: str
    versions: dict[str, str]
    status: str
    complete: bool
    error: str | None
    warnings: list[str]
    steps: int
    warmup_steps: int | None
    steady_steps: int
    compiles: int | None
    library_compiles: int
    distinct_graphs: int
    compile_seconds: float | None
    backward_compile_seconds: float
    executions: int | None
    execute_seconds: float | None
    transfers_to_device: int | None
    bytes_to_device: int | None
    transfers_from_device: int | None
    bytes_from_device: int | None
    transfer_from_device_seconds: float | None
    #: host syncs (``sync`` events); None when the backend does not measure them there
    syncs: int | None
    fallback_ops: dict[str, int]
    graph_breaks: int
    eager_fallbacks: int
    median_step_seconds: float | None
    median_step_seconds_all: float | None
    wall_seconds: float
    #: how many steps the median step covers, and which: "steady" (compiled nothing, or after
    #: the fixed warm-up) or "all" (too few steady steps)
    median_step_steps: int = 0
    median_step_basis: str = "all"
    #: the backend runtime's own counters over the run (XLA: torch_xla's metric sample counts)
    runtime_counts: dict[str, int] = field(default_factory=dict, metadata={"omit_empty": True})
    #: torch_xla's eager mode: ops are compiled and run one by one, there are no graphs
    eager_mode: bool = field(default=False, metadata={"omit_empty": True})
    #: why the run did no work (its steps ran nothing on the device), when it did none
    idle: str | None = field(default=None, metadata={"omit_none": True})
    #: real tokens the steps trained on, the padding efficiency (real over computed tokens)
    #: and real tokens per second of the steps' wall time, compiles included, where measured
    #: (:mod:`lazyscope.analyze.tokens`), and how they were counted
    real_tokens: int | None = field(default=None, metadata={"omit_none": True})
    padding_efficiency: float | None = field(default=None, metadata={"omit_none": True})
    real_tokens_per_second: float | None = field(default=None, metadata={"omit_none": True})
    tokens_counted_by: str | None = field(default=None, metadata={"omit_none": True})
    #: the run is still being written by this process (``pid 1234 (host)``, status
    #: ``running``): the report is of the run so far
    being_written_by: str | None = field(default=None, metadata={"omit_none": True})


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def steady_mask_of(steps: StepTable, warmup_steps: int | None) -> np.ndarray:
    """Steps that count for step-time statistics: from ``warmup_steps`` on when the user fixed
    it, else the steps that compiled nothing (all steps when compilations are not measured)."""
    n = len(steps)
    if warmup_steps is not None:
        return np.arange(n) >= warmup_steps
    compiles = steps.col("compile_count")
    if compiles is None:
        return np.ones(n, dtype=bool)
    return np.asarray(compiles == 0)


def timed_steps(steps: StepTable, warmup_steps: int | None) -> tuple[np.ndarray, str]:
    """The steps step-time statistics cover (a boolean mask) and their basis: the steady steps
    when there are at least MIN_STEADY_STEPS of them, else every step."""
    steady = steady_mask_of(steps, warmup_steps)
    if int(steady.sum()) >= MIN_STEADY_STEPS:
        return steady, "steady"
    return np.ones(len(steps), dtype=bool), "all"


def summarize(run: Run, *, library_compiles: int = 0, distinct_graphs: int = 0,
              backward_seconds: float = 0.0) -> Summary:
    """The run's totals. The counts that need the event analysis are passed in by
    :func:`lazyscope.analyze.report.build_report`, which computes them once."""
    steps = run.steps
    walls = steps.values("wall_s")
    steady = steady_mask_of(steps, run.meta.warmup_steps)
    timed, basis = timed_steps(steps, run.meta.warmup_steps)
    fallbacks: dict[str, int] = {}
    ev = run.events
    sel = ev.indices("fallback_exec")
    if len(sel):
        payloads, inverse = np.unique(ev.payload[sel], return_inverse=True)
        counts = np.bincount(inverse, weights=ev.value[sel])
        for pid, n in zip(payloads, counts, strict=True):
            data = ev.payload_of(int(pid))
            if data is not None and n:
                fallbacks[data.op] = fallbacks.get(data.op, 0) + int(n)
    fallbacks = dict(sorted(fallbacks.items(), key=lambda kv: (-kv[1], kv[0])))
    tail = steps.tail
    wall = float(walls.sum()) + (tail.wall_s or 0.0 if tail is not None else 0.0)
    m = run.meta
    info = m.run_info
    tokens = measured_tokens(run)
    return Summary(
        target=m.target, target_kind=m.target_kind, args=list(m.args), backend=m.backend,
        device=m.device, versions=dict(m.versions), status=run.status, complete=run.complete,
        error=m.error, warnings=list(run.warnings),
        steps=len(steps), warmup_steps=m.warmup_steps, steady_steps=int(steady.sum()),
        compiles=_int(steps.total("compile_count")), library_compiles=library_compiles,
        distinct_graphs=distinct_graphs,
        compile_seconds=steps.total("compile_s"), backward_compile_seconds=backward_seconds,
        executions=_int(steps.total("execute_count")), execute_seconds=steps.total("execute_s"),
        transfers_to_device=_int(steps.total("to_device_count")),
        bytes_to_device=_int(steps.total("to_device_bytes")),
        transfers_from_device=_int(steps.total("from_device_count")),
        bytes_from_device=_int(steps.total("from_device_bytes")),
        transfer_from_device_seconds=steps.total("from_device_s"),
        syncs=ev.count("sync") if "sync" in m.capabilities.events else None,
        fallback_ops=fallbacks,
        graph_breaks=ev.count("graph_break"), eager_fallbacks=ev.count("eager_fallback"),
        median_step_seconds=float(np.median(walls[timed])) if timed.any() else None,
        median_step_seconds_all=float(np.median(walls)) if len(walls) else None,
        wall_seconds=wall, median_step_steps=int(timed.sum()), median_step_basis=basis,
        runtime_counts=_runtime_counts(info.runtime_counts),
        eager_mode=info.eager_mode,
        idle=idle_reason(steps) if not run.warnings and run.written_by is None else None,
        real_tokens=tokens.real if tokens else None,
        padding_efficiency=tokens.padding_efficiency if tokens else None,
        real_tokens_per_second=tokens.per_second if tokens else None,
        tokens_counted_by=tokens.source if tokens else None,
        being_written_by=run.written_by,
    )


#: a run whose steps ran nothing on the device in at least this share of them did no work
IDLE_SHARE = 0.9


def idle_reason(steps: StepTable) -> str | None:
    """Why the run did no work, or None: its steps (3 or more) ran fewer executions on the
    device, in all, than ``1 - IDLE_SHARE`` of their number (a loop over a loader that died: a
    Trainer that stopped at step 0 keeps reaching barriers). Counted over the whole run, the
    tail included: torch_xla counts an execution when it finishes, often after the step's
    barrier, so a busy step can read 0. None where executions are not counted."""
    if steps.col("execute_count") is None or len(steps) < 3:
        return None
    n = len(steps)
    executions = int(steps.total("execute_count") or 0)
    if executions >= (1 - IDLE_SHARE) * n:
        return None
    return f"its {n} steps ran {counted(executions, 'execution')} on the device in all"


def _runtime_counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
