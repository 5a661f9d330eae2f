"""Findings: what to change, at which line, ranked by the time it costs; and notes, one-offs
worth knowing that are not worth a finding.

Every finding names the user's line that must change (``file``, ``line``, ``function``), the
user frames that led there (``stack``, innermost first), how often (``count``, ``steps``), the
time it cost (``seconds``), what happened (``detail``) and what to do (``fix``), in the words of
the backend that produced the run (:mod:`lazyscope.wording`). A recompile finding also says where
the graph was cut or which function was compiled (``compiled_at``) and what changed against the
closest earlier graph (``changes``).

Kinds: ``recompile``, ``sync``, ``fallback``, ``graph_break``, ``eager_fallback``.
Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.breaks import BreakSite, EagerSite
from lazyscope.analyze.fallbacks import FallbackOp
from lazyscope.analyze.recompiles import (
    EVICTED,
    IDENTICAL,
    SiteCompiles,
    Varying,
    changes_text,
)
from lazyscope.analyze.syncs import SyncSite
from lazyscope.model import OWNER_LIBRARY, Change, Frame
from lazyscope.wording import plural, say, table

#: steps listed per finding (``step_count`` has the total)
MAX_STEPS_LISTED = 1000
#: a blocking step-closure read in at least this share of the steps is a note
CLOSURE_NOTE_SHARE = 0.5
#: a line that reads values is a finding when it reads in at least this share of the steps ...
SYNC_STEP_SHARE = 0.1
#: ... or costs at least this share of the run's wall time (an accuracy read once per epoch
#: is neither)
SYNC_TIME_SHARE = 0.05


@dataclass
class Finding:
    kind: str
    file: str
    line: int
    function: str
    stack: list[Frame]
    count: int
    steps: list[int]
    step_count: int
    seconds: float
    detail: str
    fix: str
    compiled_at: Frame | None = None
    changes: list[Change] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "unknown line"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind, "file": self.file, "line": self.line, "function": self.function,
            "stack": [f.to_json() for f in self.stack], "count": self.count,
            "steps": self.steps, "step_count": self.step_count, "seconds": self.seconds,
            "detail": self.detail, "fix": self.fix,
        }
        if self.kind == "recompile":
            out["compiled_at"] = self.compiled_at.to_json() if self.compiled_at else None
            out["changes"] = [c.to_json() for c in self.changes]
        out.update(self.extra)
        return out


def _steps(steps: np.ndarray) -> tuple[list[int], int]:
    return [int(s) for s in steps[:MAX_STEPS_LISTED]], int(len(steps))


def _loc(frame: Frame | None) -> tuple[str, int, str]:
    return (frame.file, frame.line, frame.function) if frame else ("", 0, "")


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


# --------------------------------------------------------------------------- recompiles


def _dims_text(varying: list[Varying]) -> str:
    return ", ".join(f"dim {v.index} of {v.input}" for v in varying[:3])


def _recompile_reasons(entry: SiteCompiles) -> list[str]:
    reasons = [v.text() for v in entry.varying if v.what in ("dim", "rank", "dtype", "value")]
    if not reasons:
        kinds = {c.what for r in entry.counted for c in r.changes}
        if "count" in kinds:
            reasons.append("the number of graph inputs changes")
        if "ops" in kinds:
            reasons.append("the traced operations differ")
        if any(_special_scalar(c) for r in entry.counted for c in r.changes):
            reasons.append("a special scalar (0 or 1) is baked into some graphs as a constant "
                           "and passed as an input to others")
        elif "constant" in kinds:
            reasons.append("a constant or an internal shape differs")
        if entry.evicted.count:
            reasons.append(f"{entry.evicted.count} compilation(s) of graphs compiled before")
        if any(r.cls == IDENTICAL for r in entry.counted):
            reasons.append("identical graphs compiled under new hashes")
    if entry.dynamic:
        reasons.append("torch made " + ", ".join(entry.dynamic) + " dynamic")
    return reasons


def _recompile_fix(backend: str, entry: SiteCompiles, graph_shapes: bool) -> str:
    counted = entry.counted or entry.recompiles
    whats = {c.what for r in counted for c in r.changes}
    shaped = [v for v in entry.varying if v.what in ("dim", "rank")]
    where = str(entry.origin or entry.site or "this site")
    if shaped:
        # a size that came back (graphs compiled again after the cache dropped them) cycles
        # over a set of values: it does not grow
        if all(v.growing for v in shaped) and not entry.evicted.count:
            return say(backend, "fix_growing", dims=_dims_text(shaped))
        if all(v.what == "dim" and v.index == 0 and len(v.values) == 2 for v in shaped):
            return say(backend, "fix_batch_dim")
        if entry.dynamic and backend != "xla":
            return say(backend, "fix_dynamic_now", dims=", ".join(entry.dynamic))
        if entry.origin is not None:
            return say(backend, "fix_dims_where", dims=_dims_text(shaped), where=where)
        return say(backend, "fix_dims", dims=_dims_text(shaped))
    if "dtype" in whats:
        names = sorted({c.input for r in counted for c in r.changes if c.what == "dtype"})
        return say(backend, "fix_dtype", inputs=", ".join(names[:3]))
    if "value" in whats:
        names = sorted({c.input for r in counted for c in r.changes if c.what == "value"})
        if any(n.startswith("the value passed across the graph break") for n in names):
            return say(backend, "fix_break_value")
        return say(backend, "fix_value", inputs=", ".join(names[:3]))
    if "count" in whats:
        return say(backend, "fix_count")
    if "constant" in whats:
        if any(_special_scalar(c) for r in counted for c in r.changes):
            return say(backend, "fix_special_scalar")
        return say(backend, "fix_constant", where=where)
    if "ops" in whats:
        ops = {c.text for r in counted for c in r.changes if c.what == "ops"}
        if ops and ops <= {"convert", "bitcast-convert"}:
            return say(backend, "fix_cast", where=where)
        return say(backend, "fix_ops", where=where)
    if entry.evicted.count and not entry.counted:
        return say(backend, "fix_evicted")
    if any(r.cls == IDENTICAL for r in counted):
        return say(backend, "fix_identical")
    if not graph_shapes:
        return say(backend, "fix_no_shapes")
    return say(backend, "fix_unknown")


def _special_scalar(change: Change) -> bool:
    return change.what == "constant" and "special scalar" in change.text


def recompile_finding(backend: str, entry: SiteCompiles, graph_shapes: bool) -> Finding:
    counted = entry.counted
    origin = entry.origin
    line_frame = origin or entry.site
    file, line, function = _loc(line_frame)
    if origin is None:
        stack = list(entry.stack)
    elif entry.stack and entry.stack[0].file == origin.file:
        stack = [origin, *entry.stack[1:]]  # the origin's callers are the barrier's callers
    else:
        stack = [origin]
    reasons = _recompile_reasons(entry)
    n = entry.counted_count
    examples = [f"step {r.step}: {changes_text(r.changes)}" for r in counted if r.changes][:3]
    detail = say(backend, "recompile_detail", where=str(entry.site or entry.function or "?"),
                 graphs=entry.graphs, s=plural(entry.graphs), counted=n, cs=plural(n),
                 fs=plural(entry.compiles - n),
                 reasons=("; " + "; ".join(reasons)) if reasons else "")
    if examples:
        detail += " (" + "; ".join(examples) + ")"
    if entry.backward_seconds:
        detail += (f"; forward compile {_seconds(entry.seconds)}, backward compile "
                   f"{_seconds(entry.backward_seconds)}")
    steps, step_count = _steps(entry.counted_steps)
    changes = [c for r in counted for c in r.changes][:20]
    return Finding(
        kind="recompile", file=file, line=line, function=function, stack=stack, count=n,
        steps=steps, step_count=step_count,
        seconds=entry.counted_seconds + (entry.backward_seconds * n / max(entry.compiles, 1)),
        detail=detail, fix=_recompile_fix(backend, entry, graph_shapes),
        compiled_at=entry.site if entry.phase == "graph" else _fn_frame(entry),
        changes=changes,
        extra={"varying": [{"input": v.input, "what": v.what, "dim": v.index,
                            "values": v.values[:64], "growing": v.growing} for v in entry.varying],
               "graphs": entry.graphs, "dynamic": entry.dynamic,
               "classes": dict(entry.classes)},
    )


def _fn_frame(entry: SiteCompiles) -> Frame | None:
    """The compiled function's location, ``file:line`` from dynamo's ``name (file:line)``."""
    fn = entry.function
    if "(" in fn and fn.endswith(")"):
        name, _, where = fn[:-1].rpartition(" (")
        file, _, line = where.rpartition(":")
        if line.isdigit():
            return Frame(file, int(line), name)
    return entry.site


def recompile_note(backend: str, entry: SiteCompiles, graph_shapes: bool) -> Finding:
    """A single recompilation with a cause the user can fix."""
    f = recompile_finding(backend, entry, graph_shapes)
    r = entry.counted[0] if entry.counted else None
    if r is not None:
        f.detail = say(backend, "recompile_note_detail",
                       where=str(entry.site or entry.function or "?"), step=r.step,
                       changes=changes_text(r.changes) or r.cls)
    return f


# --------------------------------------------------------------------------- the rest


def _reads(site: SyncSite) -> str:
    return ", ".join(f"{r} x{n}" for r, n in site.reads.items())


def sync_finding(backend: str, site: SyncSite) -> Finding:
    file, line, function = _loc(site.site)
    steps, step_count = _steps(site.steps)
    nsteps = len(site.steps)
    if site.closure:
        detail = say(backend, "sync_closure_detail", reads=_reads(site), nsteps=nsteps,
                     s=plural(nsteps), seconds=_seconds(site.seconds))
        fix = say(backend, "sync_closure_fix")
    else:
        forced = (say(backend, "sync_forced", n=site.executions)
                  if site.executions and "sync_forced" in _table(backend) else "")
        detail = say(backend, "sync_detail", reads=_reads(site), nsteps=nsteps,
                     s=plural(nsteps), seconds=_seconds(site.seconds), forced=forced)
        branch = any(r.startswith("if tensor") for r in site.reads)
        fix = say(backend, "sync_fix_branch" if branch else "sync_fix_value")
    return Finding("sync", file, line, function, list(site.stack), site.count, steps,
                   step_count, site.seconds, detail, fix,
                   extra={"reads": site.reads, "executions": site.executions,
                          "closure": site.closure})


def _table(backend: str) -> dict[str, str]:

    return table(backend)


def fallback_finding(backend: str, op: FallbackOp) -> Finding:
    site = op.site
    file, line, function = _loc(site.site if site else None)
    steps, step_count = _steps(op.steps)
    via = f" (called through {site.via})" if site and site.via else ""
    if site and site.backward:
        via += " in the backward pass of the op created at this line"
    others = [s for s in op.sites if s is not site and s.site is not None]
    detail = say(backend, "fallback_detail", op=op.op, count=op.count, nsteps=step_count,
                 via=via)
    if others:
        detail += "; also at " + ", ".join(f"{s.site.file}:{s.site.line}" for s in others[:3])
    replacement = op.replacement()
    fix = (say(backend, "fallback_fix", op=op.op, replacement=replacement) if replacement
           else say(backend, "fallback_fix_generic"))
    return Finding("fallback", file, line, function, list(site.stack) if site else [],
                   op.count, steps, step_count, op.seconds, detail, fix,
                   extra={"op": op.op, "via": site.via if site else ""})


def break_finding(backend: str, b: BreakSite) -> Finding:
    file, line, function = _loc(b.site)
    steps, step_count = _steps(b.steps)
    hints = (" (hints: " + " ".join(b.hints) + ")") if b.hints else ""
    reason = b.reason.strip()
    if b.kind == "whole function":
        detail = say(backend, "break_whole_detail", function=b.function or "the function",
                     reason=reason, hints=hints)
    else:
        detail = say(backend, "break_detail", count=b.count, s=plural(b.count), reason=reason,
                     hints=hints)
    low = reason.lower()
    if "graph_break()" in low or "explicit" in low or b.kind == "Call to `torch._dynamo.graph_break()`":
        fix = say(backend, "break_fix_explicit")
    elif "item" in low or "scalar" in low or "tolist" in low:
        fix = say(backend, "break_fix_item")
    elif "print" in low or "logging" in low:
        fix = say(backend, "break_fix_print")
    elif b.hints:
        fix = say(backend, "break_fix_hints", hints=" ".join(b.hints))
    else:
        fix = say(backend, "break_fix_generic")
    return Finding("graph_break", file, line, function, list(b.stack), b.count, steps,
                   step_count, 0.0, detail, fix,
                   extra={"reason": reason, "hints": b.hints, "break_type": b.kind,
                          "function_compiled": b.function})


def eager_finding(backend: str, e: EagerSite) -> Finding:
    file, line, function = _loc(e.site)
    detail = say(backend, "eager_detail", function=e.function or "the function",
                 limit=e.limit if e.limit is not None else "?", step=e.step,
                 reason=e.last_reason or "?")
    return Finding("eager_fallback", file, line, function, list(e.stack), e.count, [e.step], 1,
                   0.0, detail, say(backend, "eager_fix"),
                   extra={"function_compiled": e.function, "limit": e.limit,
                          "last_reason": e.last_reason})


def make_findings(backend: str, *, sites: list[SiteCompiles], syncs: list[SyncSite],
                  fallbacks: list[FallbackOp], breaks: list[BreakSite], eagers: list[EagerSite],
                  steps: int, graph_shapes: bool = True,
                  wall_seconds: float = 0.0) -> tuple[list[Finding], list[Finding]]:
    """``(findings, notes)``, each ranked by seconds (then count)."""
    findings: list[Finding] = []
    notes: list[Finding] = []
    for entry in sites:
        n = entry.counted_count
        if n >= 2:
            findings.append(recompile_finding(backend, entry, graph_shapes))
        elif n == 1:
            notes.append(recompile_note(backend, entry, graph_shapes))
    for site in syncs:
        if site.owner == OWNER_LIBRARY or site.closure == "async":
            continue
        if site.closure:
            if steps and len(site.steps) >= max(2, CLOSURE_NOTE_SHARE * steps):
                notes.append(sync_finding(backend, site))
        elif site.recurring and (
                not steps or len(site.steps) >= SYNC_STEP_SHARE * steps
                or (wall_seconds and site.seconds >= SYNC_TIME_SHARE * wall_seconds)):
            findings.append(sync_finding(backend, site))
    findings += [fallback_finding(backend, op) for op in fallbacks if op.count > 0]
    findings += [break_finding(backend, b) for b in breaks]
    findings += [eager_finding(backend, e) for e in eagers]
    return sorted(findings, key=_rank), sorted(notes, key=_rank)


def _rank(f: Finding) -> tuple:
    return (-f.seconds, -f.count, f.kind, f.file, f.line)


__all__ = ["EVICTED", "Finding", "make_findings"]
