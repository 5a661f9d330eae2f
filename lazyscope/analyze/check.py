"""The CI gate: rules about a run's report -> violations, each with the evidence that proves it.

``check_report(report, rules) -> CheckResult``. Pure: no I/O, no printing;
:mod:`lazyscope.render.check` gives its text and JSON.

Rules (all optional; with none given, ``max_recompiles=0``, ``no_barrier_loops`` and
``no_memory_findings`` apply: "no recompilation in steady state", no loop that ends no step, no
memory finding; so the default check fails on every finding kind the verdict leads with except
the time shares, host syncs, fallbacks and graph breaks, which have rules of their own):

* ``max_recompiles`` - recompilations in steady state: the recompile findings of the report (a
  site that keeps compiling variants; see ``recompiles.py``). A single one-off recompilation is
  a note, not a violation. With ``--warmup-steps N`` every compilation from step N on counts.
  Evidence: each recompiling site, the line to change, the graph it was cut at, the steps and
  what changed.
* ``no_barrier_loops`` - no loop that ends no step (a ``no_barrier`` finding: its iterations
  traced into one graph, compiled at a read after the loop; :mod:`lazyscope.analyze.barriers`).
* ``no_memory_findings`` - no ``lost_aliasing`` and no ``growing_memory`` finding
  (:mod:`lazyscope.analyze.memory`).
* ``max_syncs_per_step`` - host syncs in any one step (the larger of the step's device-to-host
  transfers and its ``sync`` events). Evidence: the worst steps and the sync sites.
* ``no_fallbacks`` - any CPU-fallback op execution anywhere in the run.
* ``no_graph_breaks`` - any torch.compile graph break.
* ``max_step_seconds`` - wall time of any timed step: the steps the report's median step covers
  (the steady steps: compiled nothing, or after the fixed warm-up; every step when fewer than
  three are steady). Evidence: the slow steps.
* ``max_input_share`` / ``max_tracing_share`` (0..1) - the share of the mean steady step spent
  waiting for data, and on the host's own work (tracing, on XLA), from the step anatomy
  (:mod:`lazyscope.analyze.anatomy`). Evidence: the steady step's parts and the input-bound /
  host-bound finding at its line. Off by default.
* ``max_graph_memory`` (bytes) / ``max_graph_memory_share`` (of the device's memory, where the
  runtime reports its limit) - what any compiled graph holds on the device while it runs
  (inputs + outputs - aliased + intermediates + program, the backend's own analysis).
  Evidence: each site whose largest graph is over, with its sizes and shape.
* ``--baseline BASE`` (``check_report(..., baseline=)``) - the run against a baseline run of the
  same program: its compilations, host syncs and executions per step, the CPU (and device)
  time of its steady step, and its wall-clock step time unless the machine was loaded
  (:mod:`lazyscope.analyze.baseline`; ``baseline_tolerance``: ``--tolerance``). With a baseline, the default rule applies only when
  asked for.
* a pod (a run several hosts wrote to one URL) is always checked for divergence
  (``no-host-divergence``): a host that compiled graphs the others did not, a straggler host, a
  host that stopped early (``analyze/hosts.py``). Evidence: each divergence finding at its line.
* ``no_rank_divergence`` - a multi-process run whose ranks compile different graphs or whose
  step times drift apart (a straggler). Evidence: the divergence found.

A run that did not end ``ok`` (``failed``, ``interrupted``, ``no_space``, or ``incomplete``:
killed) fails the gate with a ``run-status`` violation, one that did no work (its steps ran
nothing on the device: ``Summary.idle``) with ``run-work``, and one whose files loaded with a
warning (a record file emptied or missing, values no step can have) with ``run-files``;
``allow_incomplete=True`` checks the recorded steps anyway and turns either into a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lazyscope.analyze.baseline import DEFAULT_TOLERANCE, compare_to_baseline
from lazyscope.analyze.findings import BreakFacts
from lazyscope.analyze.report import Report, compiles_unexplained
from lazyscope.analyze.summary import timed_steps
from lazyscope.analyze.wording import plural
from lazyscope.core.units import counted, nbytes, size_given

MAX_EVIDENCE = 10


@dataclass
class Rules:
    """The limits to check; ``None`` / ``False`` means the rule is not checked."""

    max_recompiles: int | None = None
    max_syncs_per_step: int | None = None
    no_fallbacks: bool = False
    no_graph_breaks: bool = False
    max_step_seconds: float | None = None
    no_rank_divergence: bool = False
    allow_incomplete: bool = False
    max_graph_memory: int | None = None
    max_graph_memory_share: float | None = None
    #: the steady step's input share (waiting for data) and host share (tracing, on XLA) at
    #: most this (0..1; :mod:`lazyscope.analyze.anatomy`)
    max_input_share: float | None = None
    max_tracing_share: float | None = None
    #: ``max_syncs_per_step`` counts the steps from this one on (``lazyscope.guard``: not the
    #: warm-up steps it was given)
    syncs_from_step: int = 0
    #: ``--baseline``: the share of the baseline's time per step a run may take more
    #: (``--tolerance``)
    baseline_tolerance: float = DEFAULT_TOLERANCE
    #: no loop that ends no step (a ``no_barrier`` finding)
    no_barrier_loops: bool = False
    #: no ``lost_aliasing`` or ``growing_memory`` finding
    no_memory_findings: bool = False

    def any_rule(self) -> bool:
        return (self.max_recompiles is not None or self.max_syncs_per_step is not None
                or self.no_fallbacks or self.no_graph_breaks
                or self.max_step_seconds is not None or self.no_rank_divergence
                or self.max_graph_memory is not None
                or self.max_graph_memory_share is not None
                or self.max_input_share is not None or self.max_tracing_share is not None
                or self.no_barrier_loops or self.no_memory_findings)

    def with_default(self) -> Rules:
        """These rules, or the default ones when no rule was given: no recompilation in steady
        state, no loop without a barrier, no memory finding."""
        if self.any_rule():
            return self
        return Rules(max_recompiles=0, no_barrier_loops=True, no_memory_findings=True,
                     allow_incomplete=self.allow_incomplete,
                     baseline_tolerance=self.baseline_tolerance)


@dataclass
class Violation:
    """One rule broken: what was allowed, what was seen, and the lines that show where."""

    rule: str
    limit: Any
    actual: Any
    message: str
    evidence: list[str] = field(default_factory=list)


@dataclass
class CheckResult:
    """What ``lazyscope check`` found; its JSON (:func:`lazyscope.model.codec.encode`) has
    ``passed``, ``run_dir``, ``status``, ``steps``, ``rules`` (each ``rule``, ``description``,
    ``passed``), ``violations`` (each ``rule``, ``limit``, ``actual``, ``message``,
    ``evidence``) and ``notes``."""

    run_dir: str
    status: str
    steps: int
    #: (rule id, what it asks) for each rule checked
    rules: list[tuple[str, str]] = field(metadata={"json": False})
    violations: list[Violation]
    notes: list[str] = field(default_factory=list)
    #: the baseline run compared against (``--baseline``), if any
    baseline: str | None = field(default=None, metadata={"omit_none": True})

    JSON_EXTRA: ClassVar[dict[str, str]] = {"passed": "passed", "rules": "rule_results"}

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def rule_results(self) -> list[RuleResult]:
        broken = {v.rule for v in self.violations}
        return [RuleResult(rid, text, rid not in broken) for rid, text in self.rules]


@dataclass
class RuleResult:
    """A rule checked: its id, what it asks, whether the run obeyed it."""

    rule: str
    description: str
    passed: bool


def _capped(lines: list[str], total: int, what: str) -> list[str]:
    if total > len(lines):
        lines.append(f"... and {total - len(lines)} more {what}")
    return lines


def _steps_text(steps: list[int], total: int) -> str:
    shown = ", ".join(str(s) for s in steps[:12])
    return shown + (f", ... ({total} steps)" if total > 12 else "")


def _check_recompiles(report: Report, limit: int) -> Violation | None:
    fixed = report.summary.warmup_steps is not None
    found = [f for f in report.findings if f.kind == "recompile"]
    if fixed:  # every counted compilation from the fixed warm-up on
        found += [f for f in report.notes if f.kind == "recompile"]
    total = sum(f.count for f in found)
    if total <= limit:
        return _unexplained_recompiles(report, limit) if fixed else None
    evidence = []
    for f in found[:MAX_EVIDENCE]:
        line = f"{f.where}: {counted(f.count, 'recompilation')} in steps {_steps_text(f.steps, f.step_count)}"
        if f.compiled_at is not None and (f.compiled_at.file, f.compiled_at.line) != (f.file, f.line):
            line += f"; graphs cut at {f.compiled_at.file}:{f.compiled_at.line}"
        line += f"; {f.detail}"
        evidence.append(line)
    evidence = _capped(evidence, len(found), "recompiling sites")
    when = (f"from step {report.summary.warmup_steps} on (--warmup-steps)" if fixed
            else "in steady state")
    return Violation(
        rule="max-recompiles", limit=limit, actual=total,
        message=(f"{counted(total, 'recompilation')} {when} at {counted(len(found), 'site')}; "
                 f"at most {limit} allowed"),
        evidence=evidence)


def _unexplained_recompiles(report: Report, limit: int) -> Violation | None:
    """Compilations the backend counted whose causes it never recorded (a trace entered after
    torch_xla's first compilation: :func:`compiles_unexplained`): with a fixed warm-up, every
    compilation the step counters show from it on counts (no event says which are
    recompilations, and none may pass as a static graph)."""
    col = report.steps.col("compile_count")
    first = report.summary.warmup_steps
    if col is None or first is None or not compiles_unexplained(report.summary,
                                                                report.capabilities):
        return None
    counts = np.nan_to_num(np.asarray(col[first:], dtype=float))
    total = int(counts.sum())
    if total <= limit:
        return None
    steps = [first + int(i) for i in np.flatnonzero(counts > 0)]
    return Violation(
        rule="max-recompiles", limit=limit, actual=total,
        message=(f"{counted(total, 'compilation')} from step {first} on (--warmup-steps), "
                 f"counted by the backend, their causes unknown; at most {limit} allowed"),
        evidence=[f"compiled in steps {_steps_text(steps[:12], len(steps))}",
                  "the backend had compiled before this trace began, so it recorded no "
                  "graph or cause for them (see the run's notes)"])


#: finding kinds a rule fails on without a limit: rule id -> (kinds, what they are)
KIND_RULES = {"no-barrier-loops": (("no_barrier",), "loop that ends no step"),
              "no-memory-findings": (("lost_aliasing", "growing_memory"), "memory finding")}


def _check_kinds(report: Report, rule: str) -> Violation | None:
    kinds, what = KIND_RULES[rule]
    found = [f for f in report.findings if f.kind in kinds]
    if not found:
        return None
    return Violation(rule=rule, limit=0, actual=len(found),
                     message=f"{counted(len(found), what)}; none allowed",
                     evidence=[f"[{f.kind}] {f.where}: {f.detail}; fix: {f.fix}"
                               for f in found[:MAX_EVIDENCE]])


def _check_syncs(report: Report, limit: int, first: int = 0) -> Violation | None:
    counts = report.syncs_per_step
    bad = np.flatnonzero(counts > limit)
    bad = bad[bad >= first]
    if not len(bad):
        return None
    worst = int(counts[bad].max())
    sites = [s for s in report.syncs if s.owner == "user"]
    evidence = [f"step {int(i)}: {int(counts[i])} sync{plural(int(counts[i]))}"
                for i in bad[:MAX_EVIDENCE]]
    evidence = _capped(evidence, len(bad), "steps over the limit")
    evidence += [f"reads at {s.site.file}:{s.site.line}: {s.count} in {len(s.steps)} "
                 f"step{plural(len(s.steps))}"
                 for s in sites[:MAX_EVIDENCE] if s.site is not None]
    return Violation(
        rule="max-syncs-per-step", limit=limit, actual=worst,
        message=(f"{len(bad)} step{plural(len(bad))} with more than {limit} host "
                 f"sync{plural(limit)} (worst: {worst}); "
                 f"{int(counts.sum())} syncs in all"),
        evidence=evidence)


def _check_fallbacks(report: Report) -> Violation | None:
    ops = [op for op in report.fallbacks if op.count > 0]
    if not ops:
        return None
    evidence = []
    for op in ops:
        line = (f"{op.op}: {counted(op.count, 'execution')} in steps "
                f"{_steps_text([int(s) for s in op.steps[:12]], len(op.steps))}")
        sites = [f"{s.site.file}:{s.site.line}" for s in op.sites if s.site is not None]
        if sites:
            line += f"; at {', '.join(sorted(set(sites)))}"
        evidence.append(line)
    total = sum(op.count for op in ops)
    return Violation(rule="no-fallbacks", limit=0, actual=total,
                     message=f"{counted(total, 'CPU-fallback op execution')} of {counted(len(ops), 'op')}; none "
                             "allowed", evidence=evidence)


def _check_breaks(report: Report) -> Violation | None:
    found = [f for f in report.findings if f.kind == "graph_break"]
    if not found:
        return None
    total = sum(f.count for f in found)
    return Violation(rule="no-graph-breaks", limit=0, actual=total,
                     message=f"{counted(total, 'graph break')} at {counted(len(found), 'line')}; none allowed",
                     evidence=[f"{f.where}: {f.facts.reason}" for f in found[:10]
                               if isinstance(f.facts, BreakFacts)])


def _check_step_seconds(report: Report, limit: float) -> Violation | None:
    walls = report.steps.values("wall_s")
    steady, basis = timed_steps(report.steps, report.summary.warmup_steps)
    slow = np.flatnonzero(steady & (walls > limit))
    if not len(slow):
        return None
    worst = float(walls[slow].max())
    evidence = [f"step {int(i)}: {walls[i]:.4f} s" for i in slow[:MAX_EVIDENCE]]
    evidence = _capped(evidence, len(slow), "slow steps")
    return Violation(
        rule="max-step-seconds", limit=limit, actual=worst,
        message=(f"{len(slow)} of {int(steady.sum())} {'steady' if basis == 'steady' else ''} "
                 f"step{plural(int(steady.sum()))} took longer than {limit:g} s (slowest {worst:.4f} s)").replace("  ", " "),
        evidence=evidence)


#: the share rules: rule id -> (anatomy part, what it is, the finding kind that explains it)
SHARE_RULES = {"max-input-share": ("input", "waiting for data (input wait)", "input_bound"),
               "max-tracing-share": ("host", "on the host (tracing, on XLA)", "host_bound")}


def _check_share(report: Report, rule: str, limit: float) -> Violation | None:
    part, what, kind = SHARE_RULES[rule]
    times = report.anatomy
    if times is None:
        return None
    share = times.steady.shares()[part]
    if share <= limit:
        return None
    name = times.label(part)
    evidence = [f"steady step {times.steady.wall_s * 1e3:.1f} ms (mean of {times.steps}): "
                + ", ".join(f"{times.label(p)} {v:.0%}" for p, v in times.steady.shares().items()
                            if v >= 0.005)]
    evidence += [f"{f.where}: {f.detail}; fix: {f.fix}" for f in report.findings
                 if f.kind == kind][:MAX_EVIDENCE]
    return Violation(
        rule=rule, limit=limit, actual=round(share, 4),
        message=(f"the steady step spends {share:.0%} {what} ({name} "
                 f"{times.steady.parts()[part] * 1e3:.1f} ms of {times.steady.wall_s * 1e3:.1f} "
                 f"ms); at most {limit:.0%} allowed"),
        evidence=evidence)


def check_time_unmeasured(report: Report) -> str:
    """Why the share rules cannot be checked on this run ("" when they can)."""
    if report.anatomy is None:
        return ("this run does not cut its steps' time into parts (recorded before lazyscope "
                "measured it, or with no step)")
    return ""


def check_graph_memory_unmeasured(report: Report, rules: Rules) -> str:
    """Why the graph-memory rule cannot be checked on this run ("" when it can): no graph's
    memory was recorded, or a share of a device whose limit is not reported."""
    mem = report.memory
    if mem is None or not mem.sites:
        return (f"no compiled graph's memory was recorded by the {report.summary.backend} "
                "backend in this run (XLA records it from torch_xla's Post Compilation "
                "Analysis)")
    if rules.max_graph_memory is None and graph_memory_limit(report, rules) is None:
        return ("a share of the device needs the device's memory limit, which the runtime did "
                "not report (" + (mem.device_note or "not measured") + "): give a size (16GiB)")
    return ""


def graph_memory_limit(report: Report, rules: Rules) -> int | None:
    """The byte limit of the graph-memory rule: the size given, or the share of the device's
    memory (None when the runtime does not report its limit)."""
    if rules.max_graph_memory is not None:
        return rules.max_graph_memory
    mem = report.memory
    if rules.max_graph_memory_share is None or mem is None or mem.device is None or \
            mem.device.limit is None:
        return None
    return int(mem.device.limit * rules.max_graph_memory_share)


def _check_graph_memory(report: Report, limit: int) -> Violation | None:
    mem = report.memory
    over = [s for s in (mem.sites if mem is not None else []) if s.largest.total > limit]
    if not over:
        return None
    worst = over[0].largest
    evidence = [f"{s.site}: {nbytes(s.largest.total)} ({s.largest.total:,} B: inputs "
                f"{nbytes(s.largest.inputs)}, outputs {nbytes(s.largest.outputs)}, aliased "
                f"{nbytes(s.largest.aliased)}, intermediates {nbytes(s.largest.intermediates)})"
                f", step {s.largest.step}" + (f", inputs {s.largest.shape}" if s.largest.shape
                                              else "") for s in over[:MAX_EVIDENCE]]
    return Violation(
        rule="max-graph-memory", limit=limit, actual=worst.total,
        message=(f"{counted(len(over), 'site')} compiled a graph holding more than "
                 f"{size_given(limit)} (largest {nbytes(worst.total)} at {worst.site})"),
        evidence=_capped(evidence, len(over), "sites"))


def check_report(report: Report, rules: Rules, baseline: Report | None = None) -> CheckResult:
    """Apply ``rules`` (or the default rule when none is set and no ``baseline`` is given) to
    ``report``; with ``baseline``, the baseline rules too (:mod:`lazyscope.analyze.baseline`)."""
    if baseline is None:
        rules = rules.with_default()
    s = report.summary
    described: list[tuple[str, str]] = []
    violations: list[Violation] = []
    notes: list[str] = list(s.warnings)

    def run_gate(rule: str, limit: str, actual: str, what: str, allowed: str,
                 refused: str) -> None:
        """A fact about the whole run that no rule can vouch past: a violation, or with
        --allow-incomplete a note."""
        if rules.allow_incomplete:
            notes.append(what + allowed)
        else:
            violations.append(Violation(rule=rule, limit=limit, actual=actual,
                                        message=what + refused))

    if s.being_written_by is not None:
        # a pod's writers say each host's steps so far (the summary's are the lowest host's)
        run_gate("run-status", "ok", s.status,
                 f"the run is still being written by {s.being_written_by}"
                 + ("" if report.hosts is not None else f" ({s.steps} steps so far)"),
                 "; checked the steps so far only (--allow-incomplete)",
                 "; a gate cannot vouch for steps that have not run yet (--allow-incomplete "
                 "checks the steps so far)")
    elif s.status != "ok" or not s.complete:
        run_gate("run-status", "ok", s.status,
                 f"the run is {s.status}" + (f": {s.error}" if s.error else "")
                 + f" ({s.steps} finished steps)",
                 "; checked the recorded steps only (--allow-incomplete)",
                 "; a gate cannot vouch for steps that never ran (--allow-incomplete checks "
                 "the recorded steps anyway)")
    if s.idle:
        run_gate("run-work", "work done", "none", f"the run did no work: {s.idle}",
                 " (--allow-incomplete)", "; a gate cannot vouch for steps that did nothing")
    if s.warnings and s.status == "ok" and s.complete:
        # the run's files are damaged (a record file emptied, values no step can have): what
        # they lost cannot be vouched for
        run_gate("run-files", "intact", "damaged",
                 f"the run's files are damaged: {'; '.join(s.warnings[:3])}",
                 "; checked what loaded (--allow-incomplete)",
                 " (--allow-incomplete checks what loaded anyway)")
    if rules.max_recompiles is not None:
        described.append(("max-recompiles",
                          f"at most {counted(rules.max_recompiles, 'recompilation')} in steady state"))
        if (v := _check_recompiles(report, rules.max_recompiles)):
            violations.append(v)
        for note in report.notes:
            if note.kind == "recompile" and s.warmup_steps is None:
                notes.append(f"recompilation after warm-up (a note, not a violation): "
                             f"{note.where}: "
                             f"{note.detail}")
    for rule, on, text in (("no-barrier-loops", rules.no_barrier_loops,
                            "every loop ends its steps (no loop traced into one graph)"),
                           ("no-memory-findings", rules.no_memory_findings,
                            "no lost aliasing, no growing memory")):
        if on:
            described.append((rule, text))
            if (v := _check_kinds(report, rule)):
                violations.append(v)
    if rules.max_syncs_per_step is not None:
        described.append(("max-syncs-per-step",
                          f"at most {counted(rules.max_syncs_per_step, 'host sync')} per step"))
        if (v := _check_syncs(report, rules.max_syncs_per_step, rules.syncs_from_step)):
            violations.append(v)
    if rules.no_fallbacks:
        described.append(("no-fallbacks", "no CPU-fallback ops"))
        if (v := _check_fallbacks(report)):
            violations.append(v)
    if rules.no_graph_breaks:
        described.append(("no-graph-breaks", "no graph breaks"))
        if (v := _check_breaks(report)):
            violations.append(v)
    if rules.no_rank_divergence:
        described.append(("no-rank-divergence", "ranks compile the same graphs at the same pace"))
        divergence = list(report.divergence or [])
        if divergence:
            violations.append(Violation(
                rule="no-rank-divergence", limit=0, actual=len(divergence),
                message=f"{counted(len(divergence), 'sign')} of rank divergence", evidence=divergence))
    if report.hosts is not None:
        described.append(("no-host-divergence", "the pod's hosts compile the same graphs at the "
                           "same pace and all run to the end"))
        diverging = [f for f in report.findings if f.kind == "divergence"]
        if diverging:
            violations.append(Violation(
                rule="no-host-divergence", limit=0, actual=len(diverging),
                message=f"{counted(len(diverging), 'sign')} of host divergence",
                evidence=[f"{f.where}: {f.detail}" for f in diverging]))
    if rules.max_step_seconds is not None:
        described.append(("max-step-seconds",
                          f"no steady step longer than {rules.max_step_seconds:g} s"))
        if (v := _check_step_seconds(report, rules.max_step_seconds)):
            violations.append(v)
    for rule, share_limit in (("max-input-share", rules.max_input_share),
                              ("max-tracing-share", rules.max_tracing_share)):
        if share_limit is None:
            continue
        part, what, _ = SHARE_RULES[rule]
        described.append((rule, f"the steady step spends at most {share_limit:.0%} {what}"))
        if (v := _check_share(report, rule, share_limit)):
            violations.append(v)
    limit = graph_memory_limit(report, rules)
    if limit is not None:
        share = rules.max_graph_memory_share
        described.append(("max-graph-memory", f"no compiled graph holds more than "
                          f"{size_given(limit)}" + (f" ({share:.0%} of the device)"
                                                if rules.max_graph_memory is None and share
                                                else "")))
        if (v := _check_graph_memory(report, limit)):
            violations.append(v)
    if baseline is not None:
        compared = compare_to_baseline(report, baseline, rules.baseline_tolerance)
        described += compared.rules
        violations += [Violation(rule=r.rule, limit=r.limit, actual=r.actual, message=r.message,
                                 evidence=r.evidence) for r in compared.regressions]
        notes += [f"baseline {baseline.run_dir}: {n}" for n in compared.notes]
    return CheckResult(run_dir=report.run_dir, status=s.status, steps=s.steps, rules=described,
                       violations=violations, notes=notes,
                       baseline=baseline.run_dir if baseline is not None else None)
