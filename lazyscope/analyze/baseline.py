"""A run against a baseline run of the same program: ``lazyscope check RUN --baseline BASE``.

``compare_to_baseline(run, base, tolerance=0.10) -> BaselineResult``: pure, on two built
reports. A CI runner is a shared machine: another job loads its cores, and the same program's
steps take twice as long by the wall clock. So the rules compare what the load does not move
first, and each failure names the line that changed:

* ``baseline-compiles``: compilations rose. The run may compile as often as the baseline, or,
  when it ran more steps, as often per step. Evidence: the compile sites new in the run (a new
  graph cut at ``bl.py:23``), the recompiling lines.
* ``baseline-syncs``: host syncs per step rose (the syncs ``max-syncs-per-step`` counts): the
  run's syncs exceed the baseline's per-step rate over the run's steps by one whole sync or
  more. Evidence: the read sites new or more frequent in the run. A backend that does not
  measure syncs on either run: not compared (a note).
* ``baseline-executions``: executions per step rose by half a graph or more (a read before the
  barrier cuts the step's graph in two: one more execution every step). Evidence: the new graph
  cuts.
* ``baseline-cpu-time``: the CPU time of the steady step rose (the process's CPU seconds per
  step, every thread: the program's and XLA:CPU's compute; ``lazyscope.backends.hostclock``).
  Another process on the machine slows the step by the wall clock but not its CPU time (22.2
  ms unloaded, 22.9 ms with two busy processes on the 2 cores, whose wall time went from 22.2
  to 74.9 ms); twice the work is twice the CPU. Not nothing: XLA:CPU's threads spin while they
  wait and share caches, and three busy processes on the 2 cores added 26% to the same work's
  CPU time; so where other processes used :data:`LOADED` of the CPUs or more, the rule allows
  :data:`CONTENTION` times their load more (at most 30%, said in a note). Evidence: the compile
  sites whose graphs differ from the baseline's (the work changed there).
* ``baseline-device-time``: on an accelerator (not XLA:CPU, whose device is the host's CPU:
  the CPU time covers it), the device's execution time of the steady step rose.
* ``baseline-step-time``: the steady step got slower by the wall clock than the two runs'
  spread allows. Each run's step times are the steps its median step covers (``timed_steps``:
  the steady steps, or every step when fewer than three are steady). The run is slower when

      median(run) - median(base) > max(z99 * sqrt(se(base)^2 + se(run)^2),
                                       tolerance * median(base),
                                       drift(base))

  - the first term is the 99% interval of the difference of the two medians (z99 = 2.576):
    ``se = 1.2533 * sigma / sqrt(n)`` is the standard error of a median, ``sigma`` estimated
    from the interquartile range (IQR / 1.349), so one slow step (a collection pause, another
    process) widens nothing;
  - ``tolerance`` (``--tolerance``, 10%) of the baseline's median: two runs of one program on a
    shared machine differ between reruns by more than either run's own spread says (clock,
    cache, neighbours);
  - ``drift``: the observed range of the baseline itself, the gap between the medians of its
    first and second half of timed steps (a run that drifts while it runs allows as much).

  A wall-clock slowdown is the machine's, not the program's, when other processes used
  :data:`LOADED` (10%) of the machine's CPUs or more while the run ran (from ``/proc/stat``,
  less the run's own CPU) while its CPU time (and device time) per step held: then it is a
  note, not a failure. A step that waits longer without using more CPU (a ``sleep``, slower
  input) fails on an unloaded machine; on a loaded one the wall clock cannot tell it from the
  load, and the note says so.

The time rules use ``tolerance`` as their floor (the CPU and device time rules as the step-time
rule); counts are compared exactly. Faster is never a failure. Fewer than :data:`MIN_STEPS`
timed steps (or samples) in either run: that rule is not compared (a note); a run recorded
before lazyscope kept the host's clock has no CPU-time rule (a note), and its wall-clock rule
decides alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.diff import diff_reports
from lazyscope.analyze.report import Report
from lazyscope.analyze.summary import timed_steps
from lazyscope.core.units import counted
from lazyscope.core.units import seconds as fmt_seconds

#: z of a two-sided 99% interval
Z99 = 2.576
#: the default of ``--tolerance``: the smallest slowdown called one, as a share of the
#: baseline's (wall-clock step, CPU time and device time per step)
DEFAULT_TOLERANCE = 0.10
#: other processes using this much of the machine's CPUs while the run ran make its
#: wall-clock slowdown the machine's (when the CPU time held)
LOADED = 0.10
#: on a loaded machine the CPU-time rule allows this much more per unit of the others' load
#: (the share of the machine's CPUs they used, at most 1): contention, not work
CONTENTION = 0.30
#: executions per step that rose by this much: the step's graph is cut in more pieces
EXECUTIONS_MARGIN = 0.5
#: the standard error of a median is this times sigma / sqrt(n) (normal data)
MEDIAN_SE = 1.2533
#: the interquartile range of normal data is this times sigma
IQR_SIGMA = 1.349
#: fewer timed steps than this: step times are not compared
MIN_STEPS = 3
#: the CPU-time rule's values are windows of this many consecutive steps (:func:`cpu_stats`)
CPU_WINDOW = 4
#: evidence lines per rule, at most
MAX_EVIDENCE = 5


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


def stats_of(values: np.ndarray) -> StepStats | None:
    """The statistics of per-step values in step order (None when fewer than MIN_STEPS)."""
    values = values[np.isfinite(values)]
    if len(values) < MIN_STEPS:
        return None
    half = len(values) // 2
    drift = abs(float(np.median(values[:half])) - float(np.median(values[half:]))) \
        if half else 0.0
    q1, q3 = (float(q) for q in np.percentile(values, [25, 75]))
    return StepStats(len(values), float(np.median(values)), q1, q3, drift)


def _timed(report: Report) -> np.ndarray:
    mask, _ = timed_steps(report.steps, report.summary.warmup_steps)
    return mask


def step_stats(report: Report) -> StepStats | None:
    """The timed steps' wall-clock statistics of ``report`` (None when fewer than MIN_STEPS)."""
    return stats_of(report.steps.values("wall_s")[_timed(report)])


def _intervals(report: Report) -> list[tuple[int, int, list[Any], list[Any]]]:
    """The host clock's intervals ``(first step, steps, sample before, sample after)`` that
    cover timed steps only."""
    clock = report.host_clock or {}
    samples = [s for s in clock.get("samples") or [] if isinstance(s, list) and len(s) == 4]
    mask = _timed(report)
    out = []
    for a, b in zip(samples, samples[1:], strict=False):
        first, last = int(a[0]), int(b[0])
        if last <= first or last > len(mask) or not mask[first:last].all():
            continue
        out.append((first, last - first, a, b))
    return out


def cpu_stats(report: Report) -> StepStats | None:
    """The CPU seconds per timed step (from the host clock's samples), over windows of
    :data:`CPU_WINDOW` consecutive steps or more (each window's CPU seconds over its steps), None
    when not recorded or too few. Not step by step: XLA:CPU runs a step's graph after the
    barrier that launched it, so its CPU lands in this step or the next by the scheduler's
    whim (3 ms and 76 ms for two steps of one loop on a loaded machine), and a window's sum
    keeps what the split moves. The last steps, when fewer than a window, are left out: a rate
    over fewer steps would carry the very split the windows are there to even out."""
    rates = []
    cpu, steps = 0.0, 0
    for _, n, a, b in _intervals(report):
        cpu, steps = cpu + float(b[1] - a[1]), steps + n
        if steps >= CPU_WINDOW:
            rates.append(cpu / steps)
            cpu, steps = 0.0, 0
    return stats_of(np.asarray(rates, dtype=float))


def others_load(report: Report) -> float | None:
    """The share of the machine's CPUs other processes used while the run ran (between its
    first and last reads of the machine's busy time: the busy seconds less the run's own CPU
    seconds, over the wall time times the CPUs), None where not measured."""
    clock = report.host_clock or {}
    read = [s for s in clock.get("samples") or []
            if isinstance(s, list) and len(s) == 4 and s[2] is not None]
    if len(read) < 2:
        return None
    a, b = read[0], read[-1]
    busy, own, wall = float(b[2] - a[2]), float(b[1] - a[1]), float(b[3] - a[3])
    cpus = int(clock.get("cpus") or 1)
    if wall <= 0:
        return None
    return min(1.0, max(0.0, (busy - own) / (wall * cpus)))


def device_stats(report: Report) -> StepStats | None:
    """The device's execution seconds per timed step on an accelerator; None on a host CPU
    (XLA:CPU: the CPU time is the device's) or where not measured."""
    device = report.summary.device or ""
    col = report.steps.col("execute_s")
    if not device or "CPU" in device.upper() or col is None:
        return None
    return stats_of(col[_timed(report)])


def allowed_slowdown(run: StepStats, base: StepStats,
                     tolerance: float = DEFAULT_TOLERANCE) -> tuple[float, dict[str, float]]:
    """The slowdown of the median the two runs' spread allows, and its three terms."""
    terms = {"99% interval": Z99 * math.sqrt(base.se ** 2 + run.se ** 2),
             f"{tolerance:.0%} of the baseline (--tolerance)": tolerance * base.median,
             "the baseline's drift": base.drift}
    return max(terms.values()), terms


def _stats_text(name: str, s: StepStats, what: str = "timed step") -> str:
    return (f"{name}: median {fmt_seconds(s.median)} over {counted(s.steps, what)} "
            f"(quartiles {fmt_seconds(s.q1)} - {fmt_seconds(s.q3)})")


def _slower(rule: str, what: str, r: StepStats | None, b: StepStats | None, tolerance: float,
            out: BaselineResult, evidence: list[str], missing: str) -> Regression | None:
    """The regression of a time per step (``what``: "the median step took {value}"), None when
    it held or could not be compared (then a note)."""
    if r is None or b is None:
        which = "the run" if r is None else "the baseline"
        out.notes.append(f"{missing} not compared: {which} has fewer than {MIN_STEPS} timed "
                         "steps that measure it")
        return None
    allowed, terms = allowed_slowdown(r, b, tolerance)
    slower = r.median - b.median
    if slower <= allowed:
        return None
    share = slower / b.median if b.median else math.inf
    terms_text = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in terms.items())
    return Regression(
        rule=rule, limit=round(b.median + allowed, 9), actual=round(r.median, 9),
        message=(f"{what.format(value=fmt_seconds(r.median))}, {fmt_seconds(slower)} "
                 f"({share:+.1%}) more than the baseline's {fmt_seconds(b.median)}; at most "
                 f"{fmt_seconds(allowed)} more allowed"),
        evidence=[_stats_text("baseline", b), _stats_text("run", r),
                  f"allowed: the largest of {terms_text}", *evidence][:3 + MAX_EVIDENCE])


def _changed_graphs(run: Report, base: Report) -> list[str]:
    """The compile sites whose graphs are not the baseline's (other content: the work done
    there changed), and those new in the run."""
    def graphs(report: Report) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for row in report.compilations:
            if row.owner == "user" and row.site:
                out.setdefault(row.site, set()).add(row.graph)
        return out

    mine, theirs = graphs(run), graphs(base)
    return [f"the graph compiled at {site} is not the baseline's (other content: the work "
            "done there changed)" for site in sorted(mine)
            if site in theirs and mine[site] != theirs[site]][:MAX_EVIDENCE]


def _new_cuts(run: Report, base: Report) -> list[str]:
    """The compile sites new in the run (a new graph cut there), and the read sites new or
    more frequent in it, each at its line."""
    d = diff_reports(base, run)
    lines = [f"a new graph cut at {c.site} ({counted(c.b, 'compilation')} there)"
             for c in d.compile_sites.appeared]
    lines += [f"a new host read at {c.site}: {c.b} in the run, none in the baseline"
              for c in d.sync_sites.appeared]
    lines += [f"more host reads at {c.site}: {c.b} in the run, {c.a} in the baseline"
              for c in d.sync_sites.changed if c.b > c.a]
    return lines[:MAX_EVIDENCE]


def _times(run: Report, base: Report, tolerance: float, out: BaselineResult) -> None:
    """The CPU time, device time and wall-clock rules (see the module docstring)."""
    changed = _changed_graphs(run, base)
    out.rules.append(("baseline-cpu-time", "the steady step uses no more CPU time than the "
                      f"baseline's, within both runs' spread and {tolerance:.0%}"))
    rc, bc = cpu_stats(run), cpu_stats(base)
    cpu = None
    if run.host_clock is None or base.host_clock is None:
        which = "the run" if run.host_clock is None else "the baseline"
        out.notes.append(f"CPU time not compared: {which} was recorded without the host's "
                         "clock (an older lazyscope): the wall clock decides alone")
    else:
        # CPU time is what another process moves least, not nothing: XLA:CPU's threads spin
        # while they wait and share caches, so a loaded machine adds CPU time to the same
        # work (+26% seen with three busy processes on 2 cores); twice the work is +100%
        load = others_load(run)
        contention = CONTENTION * min(load, 1.0) if load is not None and load >= LOADED \
            else 0.0
        cpu = _slower("baseline-cpu-time", "the steady step used {value} of CPU", rc, bc,
                      tolerance + contention, out, changed, "CPU time per step")
        if cpu is not None:
            out.regressions.append(cpu)
        elif contention:
            out.notes.append(f"CPU time compared with {contention:.0%} more allowed: other "
                             f"processes used {load:.0%} of the machine's CPUs during the run "
                             "(contention adds CPU time to the same work)")
    rd, bd = device_stats(run), device_stats(base)
    device = None
    if rd is not None or bd is not None:
        out.rules.append(("baseline-device-time", "the steady step's device time is no more "
                          f"than the baseline's, within both runs' spread and {tolerance:.0%}"))
        device = _slower("baseline-device-time", "the steady step ran on the device for {value}",
                         rd, bd, tolerance, out, changed, "device time per step")
        if device is not None:
            out.regressions.append(device)
    out.rules.append(("baseline-step-time", "the steady step is no slower than the baseline's, "
                      f"within both runs' spread and {tolerance:.0%}, or the machine was loaded "
                      "while its CPU time held"))
    wall = _slower("baseline-step-time", "the median step took {value}", step_stats(run),
                   step_stats(base), tolerance, out, changed, "step times")
    if wall is None:
        return
    load_run, load_base = others_load(run), others_load(base)
    if cpu is None and device is None and rc is not None and bc is not None and \
            load_run is not None and load_run >= LOADED:
        out.notes.append(
            f"{wall.message.split(';')[0]} by the wall clock, while other processes used "
            f"{load_run:.0%} of the machine's CPUs during the run"
            + (f" ({load_base:.0%} during the baseline)" if load_base is not None else "")
            + f" and its CPU time per step held ({fmt_seconds(rc.median)} against "
            f"{fmt_seconds(bc.median)}): a loaded machine, not a slower program")
        return
    if load_run is not None:
        wall.evidence.insert(3, f"other processes used {load_run:.0%} of the machine's CPUs "
                             "during the run" + (f", {load_base:.0%} during the baseline"
                                                 if load_base is not None else ""))
    out.regressions.append(wall)


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
        + _new_cuts(run, base)
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
    sites = _new_cuts(run, base) or [
        f"reads at {s.site.file}:{s.site.line}: {s.count} in {len(s.steps)} steps"
        for s in run.syncs if s.site is not None and s.owner == "user"][:MAX_EVIDENCE]
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


def _executions(run: Report, base: Report, out: BaselineResult) -> None:
    rx, bx = run.steps.col("execute_count"), base.steps.col("execute_count")
    if rx is None or bx is None or not len(rx) or not len(bx):
        return
    out.rules.append(("baseline-executions", "no more graph executions per step than the "
                      "baseline (the step's graph cut in no more pieces)"))
    r_rate, b_rate = float(np.nansum(rx)) / len(rx), float(np.nansum(bx)) / len(bx)
    if r_rate - b_rate < EXECUTIONS_MARGIN:
        return
    out.regressions.append(Regression(
        rule="baseline-executions", limit=round(b_rate + EXECUTIONS_MARGIN, 6),
        actual=round(r_rate, 6),
        message=(f"{r_rate:.3g} graph executions per step against the baseline's "
                 f"{b_rate:.3g}: the step's graph is cut in more pieces"),
        evidence=_new_cuts(run, base)))


def compare_to_baseline(run: Report, base: Report,
                        tolerance: float = DEFAULT_TOLERANCE) -> BaselineResult:
    """The baseline rules applied to ``run`` against ``base`` (see the module docstring)."""
    out = BaselineResult(rules=[], regressions=[])
    rs, bs = run.summary, base.summary
    if (rs.target, rs.backend) != (bs.target, bs.backend):
        out.notes.append(f"the baseline ran {bs.target} on {bs.backend}, the run {rs.target} on "
                         f"{rs.backend}: compared anyway")
    _compiles(run, base, out)
    _syncs(run, base, out)
    _executions(run, base, out)
    _times(run, base, tolerance, out)
    return out
