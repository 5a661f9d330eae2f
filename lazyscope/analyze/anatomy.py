"""Where a step's time went: its wall time cut into parts, every part measured.

A step is the time between two step barriers. The collectors measure, on the program's own
thread, the intervals a step spends

* waiting for its data (``input_s``: a ``DataLoader``'s ``__next__``, torch_xla's parallel
  loader queue; XProf calls it *input wait*),
* inside the step barrier (``barrier_s``: ``torch.cuda.synchronize()`` on CUDA, the wait for
  the device; ``torch_xla.sync()`` on XLA: graph collection, compilation, the wait for the
  device's previous step, the launch),
* inside host reads of device values (``sync_s``: ``.item()``, ``.cpu()`` ...),
* in lazyscope's own bookkeeping (``own_s``),

and the backend's compile seconds (``compile_s``). The anatomy of a step is then:

==========  ===================================================================================
input       ``input_s``
compile     ``compile_s``: on a lazy backend (XLA) the compilations ran inside the barrier or
            a read (taken out of the barrier first, then the reads); elsewhere (torch.compile)
            inside the program's Python calls (taken out of the host time)
device      the barrier's time that was not compiling: the host waited for the device (on XLA
            also the graph's collection and launch, host work torch_xla does there)
syncs       the reads' time that was not compiling
other       lazyscope's own bookkeeping
host        the rest of the wall time: Python running the program between barriers. On a lazy
            backend this is *tracing* (building the graph); on CUDA, Python and kernel launches;
            on the CPU (eager), also the computation itself, which runs there as Python calls
==========  ===================================================================================

so the parts of a step sum to its wall time, by construction; every part but ``host`` is a
measured interval, and ``host`` is what remains (clipped at 0; a negative remainder, which
only measurement noise can give, is reported in :attr:`AnatomySection.unaccounted_s`).

Statistics are over the steady steps (:func:`anatomy_steps`: the timed steps of
:func:`lazyscope.analyze.summary.timed_steps`, less the first step, which holds the program's
start, and the step right after a compilation): the
``steady`` anatomy is the mean of each part over them, so its parts sum to the mean steady
step; shares are of that sum. A run recorded before these intervals existed (schema 2), or a
backend that does not measure them, has no anatomy (None). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lazyscope.analyze.parts import seconds, step_parts
from lazyscope.analyze.summary import MIN_STEADY_STEPS, timed_steps
from lazyscope.model import Capabilities, StepTable

#: the parts, in the order every view shows them
PARTS = ("input", "host", "compile", "device", "syncs", "other")
#: what the ``host`` part is called on a lazy backend (the graph is built there)
TRACING = "tracing"


@dataclass
class Anatomy:
    """One step's (or the mean steady step's) time, in seconds, cut into :data:`PARTS`."""

    wall_s: float
    input_s: float
    host_s: float
    compile_s: float
    device_s: float
    sync_s: float
    other_s: float

    def parts(self) -> dict[str, float]:
        """``{part: seconds}`` in :data:`PARTS` order."""
        return {"input": self.input_s, "host": self.host_s, "compile": self.compile_s,
                "device": self.device_s, "syncs": self.sync_s, "other": self.other_s}

    def shares(self) -> dict[str, float]:
        """``{part: share of the wall time}`` (0 for a step of no time)."""
        total = sum(self.parts().values())
        return {k: (v / total if total > 0 else 0.0) for k, v in self.parts().items()}


@dataclass
class AnatomySection:
    """The run's step anatomy: the mean steady step's parts, the median steady step itself,
    and each part's per-step series (for the views)."""

    #: what the ``host`` part is on this backend: ``tracing`` (a lazy backend builds its graph
    #: there) or ``host``
    host_label: str
    #: the mean of each part over the steps the statistics cover (they sum to the mean step)
    steady: Anatomy
    #: the steps those are: ``steady`` (compiled nothing, or after the fixed warm-up) or
    #: ``all`` (too few steady steps), and how many
    basis: str
    steps: int
    #: the median steady step (by wall time): its index and its own parts
    median_step: int
    median: Anatomy
    #: the parts that are measured here (``syncs`` is not where host reads are not timed)
    measured: list[str]
    #: seconds of wall time over the covered steps that the measured intervals exceed (noise)
    unaccounted_s: float = 0.0
    #: per-step seconds of each part, over every step (for the tables and plots)
    per_step: dict[str, np.ndarray] = field(default_factory=dict, metadata={"json": False})

    def label(self, part: str) -> str:
        """A part's name as a view shows it."""
        return self.host_label if part == "host" else part

    def largest(self) -> tuple[str, float]:
        """The part that holds the largest share of the steady step, and that share."""
        shares = self.steady.shares()
        part = max(PARTS, key=lambda p: shares[p])
        return part, shares[part]


def anatomy_steps(steps: StepTable, warmup_steps: int | None) -> tuple[np.ndarray, str]:
    """The steps the anatomy's statistics cover: the timed steps
    (:func:`~lazyscope.analyze.summary.timed_steps`) without the first step (it holds the
    program's start: its imports, building the model, moving it to the device, all before the
    first barrier) and the step right after one that compiled (lazyscope reads a compilation's
    records at the next barrier: its own time there is warm-up's), unless too few would be
    left."""
    timed, basis = timed_steps(steps, warmup_steps)
    compiles = steps.col("compile_count")
    if not len(steps):
        return timed, basis
    after = np.zeros(len(steps), dtype=bool)
    after[0] = True
    if compiles is not None:
        after[1:] = np.nan_to_num(compiles[:-1]) > 0
    kept = timed & ~after
    return (kept, basis) if int(kept.sum()) >= MIN_STEADY_STEPS else (timed, basis)


def _anatomy(parts: dict[str, np.ndarray], wall: float, pick: np.ndarray | int,
             how: str = "mean") -> Anatomy:
    def value(a: np.ndarray) -> float:
        return float(a[pick].mean()) if how == "mean" else float(a[pick])

    return Anatomy(wall_s=wall, input_s=value(parts["input"]), host_s=value(parts["host"]),
                   compile_s=value(parts["compile"]), device_s=value(parts["device"]),
                   sync_s=value(parts["syncs"]), other_s=value(parts["other"]))


def anatomy(steps: StepTable, capabilities: Capabilities,
            warmup_steps: int | None) -> AnatomySection | None:
    """The run's step anatomy (see the module docstring), or None when the backend did not
    measure the step's intervals (an older run) or there is no step."""
    measured = set(steps.measured)
    if not {"wall_s", "barrier_s", "input_s"} <= measured or not len(steps):
        return None
    barrier = steps.col("barrier_s")
    if barrier is None or not np.isfinite(barrier).any():  # declared, never written
        return None
    lazy = bool(capabilities.lazy)
    parts, over = step_parts(steps, lazy)
    timed, basis = anatomy_steps(steps, warmup_steps)
    idx = np.flatnonzero(timed)
    wall = seconds(steps, "wall_s")
    order = idx[np.argsort(wall[idx], kind="stable")]
    median = int(order[(len(order) - 1) // 2])
    steady_parts = {k: v[idx] for k, v in parts.items()}
    mean_wall = float(sum(a.mean() for a in steady_parts.values()))
    median_wall = float(sum(parts[k][median] for k in PARTS))
    shown = ["input", "host", "compile", "device", "other"]
    if "sync_s" in measured:
        shown.insert(4, "syncs")
    return AnatomySection(
        host_label=TRACING if lazy else "host",
        steady=_anatomy(steady_parts, mean_wall, np.arange(len(idx))),
        basis=basis, steps=len(idx), median_step=median,
        median=_anatomy(parts, median_wall, median, how="one"),
        measured=shown, unaccounted_s=float(over[idx].sum()), per_step=parts)


def anatomy_line(section: AnatomySection, min_share: float = 0.005) -> str:
    """``input 44% · tracing 31% · device 20% · syncs 5%``: the steady step's parts of at
    least ``min_share``, largest first."""
    shares = section.steady.shares()
    shown = sorted((p for p in PARTS if shares[p] >= min_share), key=lambda p: -shares[p])
    return " · ".join(f"{section.label(p)} {shares[p]:.0%}" for p in shown) or "-"
