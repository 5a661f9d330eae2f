"""A run against a baseline run of the same program: ``lazyscope check RUN --baseline BASE``.

``compare_to_baseline(run, base) -> BaselineResult``: pure, on two built reports. Three rules:

* ``baseline-step-time``: the steady step got slower than the two runs' spread allows. Each
  run's step times are the steps its median step covers (``timed_steps``: the steady steps, or
  every step when fewer than three are steady). The run is slower when

      median(run) - median(base) > max(z99 * sqrt(se(base)^2 + se(run)^2),
                                       REL_FLOOR * median(base),
                                       drift(base))

  - the first term is the 99% interval of the difference of the two medians (z99 = 2.576):
    ``se = 1.2533 * sigma / sqrt(n)`` is the standard error of a median, ``sigma`` estimated
    from the interquartile range (IQR / 1.349), so one slow step (a collection pause, another
    process) widens nothing;
  - ``REL_FLOOR`` (5%) of the baseline's median: two runs of one program on a shared machine
    differ between reruns by more than either run's own spread says (clock, cache, neighbours);
    torchprime's CI uses 1.5% on TPUs, where reruns vary far less than on a shared CPU;
  - ``drift``: the observed range of the baseline itself, the gap between the medians of its
    first and second half of timed steps (a run that drifts while it runs allows as much).

  Faster is never a failure. Fewer than :data:`MIN_STEPS` timed steps in either run: not
  compared (a note).
* ``baseline-compiles``: compilations rose. The run may compile as often as the baseline, or,
  when it ran more steps, as often per step.
* ``baseline-syncs``: host syncs per step rose (the syncs ``max-syncs-per-step`` counts): the
  run's syncs exceed the baseline's per-step rate over the run's steps by one whole sync or
  more. A backend that does not measure syncs on either run: not compared (a note).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.report import Report
from lazyscope.analyze.summary import timed_steps
from lazyscope.core.units import counted
from lazyscope.core.units import seconds as fmt_seconds

#: z of a two-sided 99% interval
Z99 = 2.576
#: the smallest slowdown called one, as a share of the baseline's median step
REL_FLOOR = 0.05
#: the standard error of a median is this times sigma / sqrt(n) (normal data)
MEDIAN_SE = 1.2533
#: the interquartile range of normal data is this times sigma
IQR_SIGMA = 1.349
#: fewer timed steps than this: step times are not compared
MIN_STEPS = 3


@dataclass
class Regression:
    """A baseline rule broken: what was allowed, what was seen, and the numbers behind it."""

    rule: str
    limit: Any
    actual: Any
    message: str
    evidence: list[str] = field(default_factory=list)


@dataclass
class StepStats:
    """One run's timed steps: their count, median and spread."""

    steps: int
    median: float
    q1: float
    q3: float
    drift: float

    @property
    def se(self) -> float:
        """The standard error of the median (robust sigma from the IQR)."""
        sigma = (self.q3 - self.q1) / IQR_SIGMA
        return MEDIAN_SE * sigma / math.sqrt(self.steps) if self.steps else math.inf


@dataclass
class BaselineResult:
    rules: list[tuple[str, str]]
    regressions: list[Regression]
    notes: list[str] = field(default_factory=list)


def step_stats(report: Report) -> StepStats | None:
    """The timed steps' statistics of ``report`` (None when it has fewer than MIN_STEPS)."""
    walls = report.steps.values("wall_s")
    mask, _ = timed_steps(report.steps, report.summary.warmup_steps)
    timed = walls[mask]
    timed = timed[np.isfinite(timed)]
    if len(timed) < MIN_STEPS:
        return None
    half = len(timed) // 2
    drift = abs(float(np.median(timed[:half])) - float(np.median(timed[half:]))) \
        if half else 0.0
    q1, q3 = (float(q) for q in np.percentile(timed, [25, 75]))
    return StepStats(len(timed), float(np.median(timed)), q1, q3, drift)


def allowed_slowdown(run: StepStats, base: StepStats) -> tuple[float, dict[str, float]]:
    """The slowdown of the median step the two runs' spread allows, and its three terms."""
    terms = {"99% interval": Z99 * math.sqrt(base.se ** 2 + run.se ** 2),
             f"{REL_FLOOR:.0%} of the baseline": REL_FLOOR * base.median,
             "the baseline's drift": base.drift}
    return max(terms.values()), terms


def _stats_text(name: str, s: StepStats) -> str:
    return (f"{name}: median {fmt_seconds(s.median)} over {counted(s.steps, 'timed step')} "
            f"(quartiles {fmt_seconds(s.q1)} - {fmt_seconds(s.q3)})")


def _step_time(run: Report, base: Report, out: BaselineResult) -> None:
    out.rules.append(("baseline-step-time", "the steady step is no slower than the baseline's, "
                      "within both runs' spread"))
    r, b = step_stats(run), step_stats(base)
    if r is None or b is None:
        which = "the run" if r is None else "the baseline"
        out.notes.append(f"step times not compared: {which} has fewer than {MIN_STEPS} timed "
                         "steps")
        return
    allowed, terms = allowed_slowdown(r, b)
    slower = r.median - b.median
    if slower <= allowed:
        return
    share = slower / b.median if b.median else math.inf
    terms_text = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in terms.items())
    out.regressions.append(Regression(
        rule="baseline-step-time", limit=round(b.median + allowed, 9), actual=round(r.median, 9),
        message=(f"the median step took {fmt_seconds(r.median)}, {fmt_seconds(slower)} "
                 f"({share:+.1%}) slower than the baseline's {fmt_seconds(b.median)}; at most "
                 f"{fmt_seconds(allowed)} slower allowed"),
        evidence=[_stats_text("baseline", b), _stats_text("run", r),
                  f"allowed: the largest of {terms_text}"]))


def _compiles(run: Report, base: Report, out: BaselineResult) -> None:
    rc, bc = run.summary.compiles, base.summary.compiles
    out.rules.append(("baseline-compiles", "no more compilations than the baseline"))
    if rc is None or bc is None:
        out.notes.append("compilations not compared: not measured in "
                         + ("the run" if rc is None else "the baseline"))
        return
    rs, bs = run.summary.steps, base.summary.steps
    allowed = bc if rs <= bs or not bs else max(bc, math.floor(bc * rs / bs))
    if rc <= allowed:
        return
    per = f" (as often per step over its {rs} steps)" if allowed != bc else ""
    out.regressions.append(Regression(
        rule="baseline-compiles", limit=allowed, actual=rc,
        message=(f"{counted(rc, 'compilation')} against the baseline's {bc} in "
                 f"{counted(bs, 'step')}; at most {allowed} allowed{per}"),
        evidence=[f"baseline: {bc} in {bs} steps ({counted(base.summary.distinct_graphs, 'distinct graph')})",
                  f"run: {rc} in {rs} steps ({counted(run.summary.distinct_graphs, 'distinct graph')})"]
        + [f"recompiling at {f.where}: {f.detail}" for f in run.findings
           if f.kind == "recompile"][:3]))


def _syncs(run: Report, base: Report, out: BaselineResult) -> None:
    out.rules.append(("baseline-syncs", "no more host syncs per step than the baseline"))
    if run.summary.syncs is None or base.summary.syncs is None:
        out.notes.append("host syncs not compared: not measured in "
                         + ("the run" if run.summary.syncs is None else "the baseline"))
        return
    rs, bs = len(run.syncs_per_step), len(base.syncs_per_step)
    if not rs or not bs:
        return
    r_total, b_total = int(run.syncs_per_step.sum()), int(base.syncs_per_step.sum())
    expected = b_total * rs / bs
    if r_total < expected + 1:
        return
    sites = [f"reads at {s.site.file}:{s.site.line}: {s.count} in {len(s.steps)} steps"
             for s in run.syncs if s.site is not None and s.owner == "user"][:5]
    out.regressions.append(Regression(
        rule="baseline-syncs", limit=round(b_total / bs, 6), actual=round(r_total / rs, 6),
        message=(f"{r_total / rs:.3g} host syncs per step against the baseline's "
                 f"{b_total / bs:.3g} ({r_total} in {rs} steps, {b_total} in {bs})"),
        evidence=sites))


def baseline_unusable(base: Report) -> str | None:
    """Why ``base`` cannot be a baseline, or None: its files are damaged (a record file missing
    or cut, values no step can have: what it lost would be compared as nothing), or it holds no
    step at all (a comparison against "0 compilations in 0 steps" passes anything)."""
    s = base.summary
    if s.warnings:
        return f"its files are damaged: {'; '.join(s.warnings[:2])}"
    if s.steps == 0:
        return f"it holds no step (status {s.status})"
    return None


def compare_to_baseline(run: Report, base: Report) -> BaselineResult:
    """The baseline rules applied to ``run`` against ``base`` (see the module docstring)."""
    out = BaselineResult(rules=[], regressions=[])
    rs, bs = run.summary, base.summary
    if (rs.target, rs.backend) != (bs.target, bs.backend):
        out.notes.append(f"the baseline ran {bs.target} on {bs.backend}, the run {rs.target} on "
                         f"{rs.backend}: compared anyway")
    _step_time(run, base, out)
    _compiles(run, base, out)
    _syncs(run, base, out)
    return out
