"""The CI gate: rules about a run -> violations, each with the evidence that proves it.

``check_run(run, rules) -> CheckResult``. Pure: no I/O, no printing; ``check_dict`` gives a
JSON-able dict and :mod:`lazyscope.render.check` the text.

Rules (all optional; with none given, ``max_compiles_after_warmup=0`` applies: "no recompilation
after warm-up", the assertion serving stacks run in CI):

* ``max_compiles_after_warmup`` - compilations in steps after the warm-up steps. Evidence: each
  step that compiled, its graph hashes, and the user source line and cause of each compilation.
* ``max_syncs_per_step`` - host syncs in any one step. A step's syncs are the larger of its
  device-to-host transfers (``Step.from_device_count``) and its ``sync`` events (the two usually
  describe the same reads, so they are not added). Evidence: the worst steps and the sync sites.
* ``no_fallbacks`` - any CPU-fallback op execution anywhere in the run (tail included).
  Evidence: the ops, their counts and the steps they ran in.
* ``max_step_seconds`` - wall time of any step after warm-up. Evidence: the slow steps.

A run that did not end ``ok`` (``failed``, ``interrupted``, or ``incomplete``: killed) fails the
gate with a ``run-status`` violation, because a gate cannot vouch for steps that never ran;
``allow_incomplete=True`` checks the recorded steps anyway and turns that into a note.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lazyscope.model import STATUS_OK, Event, Run, Step

MAX_EVIDENCE = 10


@dataclass
class Rules:
    """The limits to check; ``None`` / ``False`` means the rule is not checked."""

    max_compiles_after_warmup: int | None = None
    max_syncs_per_step: int | None = None
    no_fallbacks: bool = False
    max_step_seconds: float | None = None
    allow_incomplete: bool = False

    def any_rule(self) -> bool:
        return (
            self.max_compiles_after_warmup is not None
            or self.max_syncs_per_step is not None
            or self.no_fallbacks
            or self.max_step_seconds is not None
        )

    def with_default(self) -> Rules:
        """These rules, or "no compilation after warm-up" when no rule was given."""
        if self.any_rule():
            return self
        return Rules(max_compiles_after_warmup=0, allow_incomplete=self.allow_incomplete)


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
    run_dir: str
    status: str
    steps: int
    rules: list[tuple[str, str]]  # (rule id, what it asks) for each rule checked
    violations: list[Violation]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations


def _site(event: Event) -> str:
    return str(event.site) if event.site else "unknown site"


def _events_by_step(run: Run, kind: str) -> dict[int, list[Event]]:
    out: dict[int, list[Event]] = {}
    for e in run.events:
        if e.kind == kind:
            out.setdefault(e.step, []).append(e)
    return out


def _capped(lines: list[str], total: int, what: str) -> list[str]:
    if total > len(lines):
        lines.append(f"... and {total - len(lines)} more {what}")
    return lines


def _check_compiles(run: Run, limit: int, warmup: int) -> Violation | None:
    after = [s for s in run.steps if s.index >= warmup]
    total = sum(s.compile_count for s in after)
    if total <= limit:
        return None
    events = _events_by_step(run, "compile")
    compiled = [s for s in after if s.compile_count > 0]
    evidence = []
    for s in compiled[:MAX_EVIDENCE]:
        line = f"step {s.index}: {s.compile_count} compilation(s)"
        if s.graph_hashes:
            line += f", graph {', '.join(h[:12] for h in s.graph_hashes)}"
        for e in events.get(s.index, []):
            cause = e.data.get("cause") or e.data.get("xla_cause") or ""
            line += f"; at {_site(e)}" + (f" ({cause})" if cause else "")
        evidence.append(line)
    evidence = _capped(evidence, len(compiled), "steps that compiled")
    hashes = {h for s in after for h in s.graph_hashes}
    return Violation(
        rule="max-compiles-after-warmup",
        limit=limit,
        actual=total,
        message=(
            f"{total} compilation(s) after the {warmup} warm-up step(s), on {len(compiled)} of "
            f"{len(after)} steps ({len(hashes)} distinct graphs); at most {limit} allowed"
        ),
        evidence=evidence,
    )


def syncs_per_step(run: Run) -> dict[int, int]:
    """Host syncs of each barrier step: max(device-to-host transfers, ``sync`` events)."""
    events = _events_by_step(run, "sync")
    return {s.index: max(s.from_device_count, len(events.get(s.index, []))) for s in run.steps}


def _check_syncs(run: Run, limit: int) -> Violation | None:
    counts = syncs_per_step(run)
    bad = [(i, n) for i, n in counts.items() if n > limit]
    if not bad:
        return None
    events = _events_by_step(run, "sync")
    worst = max(n for _, n in bad)
    evidence = []
    for i, n in bad[:MAX_EVIDENCE]:
        line = f"step {i}: {n} sync(s)"
        sites = sorted({_site(e) for e in events.get(i, [])})
        if sites:
            line += f" at {', '.join(sites)}"
        evidence.append(line)
    evidence = _capped(evidence, len(bad), "steps over the limit")
    return Violation(
        rule="max-syncs-per-step",
        limit=limit,
        actual=worst,
        message=(
            f"{len(bad)} step(s) with more than {limit} host sync(s) (worst: {worst}); "
            f"{sum(counts.values())} syncs in all"
        ),
        evidence=evidence,
    )


def _check_fallbacks(run: Run) -> Violation | None:
    per_op: dict[str, list[tuple[Step, int]]] = {}
    for s in run.all_steps():
        for op, n in s.fallback_ops.items():
            if n > 0:
                per_op.setdefault(op, []).append((s, n))
    if not per_op:
        return None
    sites: dict[str, set[str]] = {}
    for e in run.events:
        if e.kind == "fallback":
            op = str(e.data.get("op", ""))
            sites.setdefault(op, set()).add(_site(e))
    evidence = []
    for op, where in sorted(per_op.items()):
        steps = ", ".join(str(s.index) if s.kind == "step" else "tail" for s, _ in where[:20])
        more = "..." if len(where) > 20 else ""
        line = f"{op}: {sum(n for _, n in where)} execution(s) in steps {steps}{more}"
        if sites.get(op):
            line += f"; at {', '.join(sorted(sites[op]))}"
        evidence.append(line)
    total = sum(n for where in per_op.values() for _, n in where)
    return Violation(
        rule="no-fallbacks",
        limit=0,
        actual=total,
        message=f"{total} CPU-fallback op execution(s) of {len(per_op)} op(s); none allowed",
        evidence=evidence,
    )


def _check_step_seconds(run: Run, limit: float, warmup: int) -> Violation | None:
    after = [s for s in run.steps if s.index >= warmup]
    slow = [s for s in after if s.wall_s > limit]
    if not slow:
        return None
    worst = max(s.wall_s for s in slow)
    evidence = [f"step {s.index}: {s.wall_s:.4f} s" for s in slow[:MAX_EVIDENCE]]
    evidence = _capped(evidence, len(slow), "slow steps")
    return Violation(
        rule="max-step-seconds",
        limit=limit,
        actual=worst,
        message=(
            f"{len(slow)} of {len(after)} step(s) after warm-up took longer than {limit:g} s "
            f"(slowest {worst:.4f} s)"
        ),
        evidence=evidence,
    )


def check_run(run: Run, rules: Rules) -> CheckResult:
    """Apply ``rules`` (or the default rule when none is set) to ``run``."""
    rules = rules.with_default()
    warmup = max(0, int(run.meta.warmup_steps))
    described: list[tuple[str, str]] = []
    violations: list[Violation] = []
    notes: list[str] = list(run.warnings)

    if run.meta.status != STATUS_OK or not run.complete:
        what = (
            f"the run is {run.status}"
            + (f": {run.meta.error}" if run.meta.error else "")
            + f" ({len(run.steps)} finished steps)"
        )
        if rules.allow_incomplete:
            notes.append(what + "; checked the recorded steps only (--allow-incomplete)")
        else:
            violations.append(
                Violation(
                    rule="run-status",
                    limit=STATUS_OK,
                    actual=run.status,
                    message=what + "; a gate cannot vouch for steps that never ran "
                    "(--allow-incomplete checks the recorded steps anyway)",
                )
            )
    if len(run.steps) <= warmup and (
        rules.max_compiles_after_warmup is not None or rules.max_step_seconds is not None
    ):
        notes.append(
            f"only {len(run.steps)} step(s), all warm-up: rules about steps after warm-up "
            "have nothing to check"
        )

    if rules.max_compiles_after_warmup is not None:
        described.append(("max-compiles-after-warmup",
                          f"at most {rules.max_compiles_after_warmup} compilation(s) after warm-up"))
        v = _check_compiles(run, rules.max_compiles_after_warmup, warmup)
        if v:
            violations.append(v)
    if rules.max_syncs_per_step is not None:
        described.append(("max-syncs-per-step", f"at most {rules.max_syncs_per_step} host sync(s) per step"))
        v = _check_syncs(run, rules.max_syncs_per_step)
        if v:
            violations.append(v)
    if rules.no_fallbacks:
        described.append(("no-fallbacks", "no CPU-fallback ops"))
        v = _check_fallbacks(run)
        if v:
            violations.append(v)
    if rules.max_step_seconds is not None:
        described.append(
            ("max-step-seconds", f"no step after warm-up longer than {rules.max_step_seconds:g} s")
        )
        v = _check_step_seconds(run, rules.max_step_seconds, warmup)
        if v:
            violations.append(v)
    return CheckResult(
        run_dir=str(run.path),
        status=run.status,
        steps=len(run.steps),
        rules=described,
        violations=violations,
        notes=notes,
    )


def check_dict(result: CheckResult) -> dict[str, Any]:
    """A JSON-able dict: ``passed``, ``run_dir``, ``status``, ``steps``, ``rules``,
    ``violations`` (each ``rule``, ``limit``, ``actual``, ``message``, ``evidence``), ``notes``."""
    broken = {v.rule for v in result.violations}
    return {
        "passed": result.passed,
        "run_dir": result.run_dir,
        "status": result.status,
        "steps": result.steps,
        "rules": [
            {"rule": rid, "description": text, "passed": rid not in broken}
            for rid, text in result.rules
        ],
        "violations": [asdict(v) for v in result.violations],
        "notes": result.notes,
    }
