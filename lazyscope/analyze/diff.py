"""What changed between two runs: per-metric deltas and ratios, and sites that came, went or
moved.

``diff_reports(a, b) -> RunDiff``. Pure: no I/O, no printing (:mod:`lazyscope.render.diff`
renders it). Both sides are :class:`~lazyscope.analyze.report.Report` s, built once each.

A site is where events of a kind happened (the innermost user frame: ``file:line`` in its
function). Two runs of a script edited in between name the same code at other line numbers, so
sites are matched by what they are, not only by where:

1. the same file and line, with the same source text (or a text one run did not record:
   runs made before lazyscope recorded source text match by line alone);
2. then the same function and the same source text (runs of blanks count as one), in the same
   file first, else in any file (a script saved under a new name): the line **moved**;
3. what is left appeared (only in B) or disappeared (only in A).

The source text of a line comes from each run's own :class:`~lazyscope.model.SourceMap`,
recorded when the run was made (so the diff is right after the file was edited again).
Findings are matched the same way, by kind and the line to change; a finding of a kind one
run does not measure (a host sync in a run whose backend does not collect them) neither
appears nor disappears, and neither do that kind's sites.

:class:`RunDiff` has ``a`` / ``b`` (each run's directory, target, arguments, backend, status and
steps), ``metrics`` (:class:`MetricDelta`: ``b - a`` and ``b / a``, None where either side does
not measure it or ``a`` is 0, for compilations, recompilations, distinct graphs, compile and
execute seconds, executions, transfers both ways, host syncs, CPU-fallback executions, graph
breaks, the median step, the wall time, the measured padding efficiency, real tokens per
second and the largest compiled graph's device memory, ``graph_memory_bytes``),
``compile_sites`` / ``sync_sites`` /
``fallback_sites`` / ``break_sites`` (:class:`SiteChanges`), ``fallback_ops`` (the same, keyed by
op name), ``findings`` (:class:`FindingChanges`) and ``warnings`` (each run's load warnings,
``a:`` / ``b:``). :meth:`RunDiff.to_json` is the ``--format json`` object.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lazyscope.analyze.report import Report
from lazyscope.model import Frame, SourceMap, location

#: (name in the diff, attribute of Summary; "" = computed here)
METRICS: list[tuple[str, str]] = [
    ("steps", "steps"),
    ("compiles", "compiles"),
    ("recompiles", ""),
    ("distinct_graphs", "distinct_graphs"),
    ("compile_seconds", "compile_seconds"),
    ("executions", "executions"),
    ("execute_seconds", "execute_seconds"),
    ("transfers_to_device", "transfers_to_device"),
    ("transfers_from_device", "transfers_from_device"),
    ("host_syncs", "syncs"),
    ("fallback_executions", ""),
    ("graph_breaks", "graph_breaks"),
    ("median_step_seconds", "median_step_seconds"),
    ("wall_seconds", "wall_seconds"),
    ("padding_efficiency", "padding_efficiency"),
    ("real_tokens_per_second", "real_tokens_per_second"),
    ("graph_memory_bytes", ""),
]


@dataclass
class Side:
    """One run of the diff."""

    run_dir: str
    target: str
    args: list[str]
    backend: str
    status: str
    steps: int


@dataclass
class MetricDelta:
    name: str
    a: Any
    b: Any
    delta: Any
    ratio: float | None


@dataclass
class SiteChange:
    """A site (or a fallback op) and its event counts in each run. ``site`` is where it is in
    B (in A for one that disappeared); ``moved_from`` where it was in A, for a moved line;
    ``text`` the line's source text when a run recorded it."""

    site: str
    a: int
    b: int
    moved_from: str | None = field(default=None, metadata={"omit_none": True})
    text: str | None = field(default=None, metadata={"omit_none": True})


@dataclass
class OpChange(SiteChange):
    """A CPU-fallback op whose count changed: keyed by the op's name (``op``)."""

    site: str = field(metadata={"name": "op"})


@dataclass
class SiteChanges:
    appeared: list[SiteChange] = field(default_factory=list)
    disappeared: list[SiteChange] = field(default_factory=list)
    #: the same site in both runs, with other counts
    changed: list[SiteChange] = field(default_factory=list)
    #: the same code at another line (counts may differ too)
    moved: list[SiteChange] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.appeared or self.disappeared or self.changed or self.moved)


@dataclass
class OpChanges:
    """:class:`SiteChanges` of CPU-fallback ops (keyed ``op``; an op never moves)."""

    appeared: list[OpChange] = field(default_factory=list)
    disappeared: list[OpChange] = field(default_factory=list)
    changed: list[OpChange] = field(default_factory=list)
    moved: list[OpChange] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.appeared or self.disappeared or self.changed)


@dataclass
class FindingChanges:
    """Findings (``kind at where``) only in B, only in A, and those whose line moved
    (``kind at A's where -> B's where``)."""

    appeared: list[str] = field(default_factory=list)
    disappeared: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)


@dataclass
class RunDiff:
    a: Side
    b: Side
    metrics: list[MetricDelta]
    compile_sites: SiteChanges
    sync_sites: SiteChanges
    fallback_sites: SiteChanges
    break_sites: SiteChanges
    fallback_ops: OpChanges
    findings: FindingChanges
    warnings: list[str]

    def metric(self, name: str) -> MetricDelta:
        return next(m for m in self.metrics if m.name == name)


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return float(b / a)


def _metric(report: Report, name: str, attr: str) -> Any:
    s = report.summary
    if attr:
        return getattr(s, attr)
    if name == "recompiles":
        return sum(f.count for f in report.findings if f.kind == "recompile")
    if name == "graph_memory_bytes":  # the largest graph compiled: its device memory
        mem = report.memory
        return mem.peak.total if mem is not None and mem.peak is not None else None
    return sum(s.fallback_ops.values())


@dataclass
class _Site:
    """A site of one run: its place, the text of its line there, its count."""

    frame: Frame
    count: int
    text: str | None
    where: str


def _sites(report: Report, kind: str, sources: SourceMap) -> list[_Site]:
    """The sites of ``kind`` events, counts summed over the causes at each ``file:line``."""
    found: dict[tuple[str, int], _Site] = {}
    for g in report.groups:
        if g.kind != kind:
            continue
        frame = g.frame or Frame("", 0)  # an event with no stack at all
        key = (frame.file, frame.line)
        site = found.get(key)
        if site is None:
            found[key] = _Site(frame, g.count, sources.text(*key),
                               location(frame, sources) if frame.file else "?")
        else:
            site.count += g.count
    return sorted(found.values(), key=lambda s: (s.frame.file, s.frame.line))


def _code(text: str | None) -> str | None:
    """A line's text as code compares: runs of blanks are one (a reformatted line is the same
    line)."""
    return " ".join(text.split()) if text is not None else None


def _pairs(a: list[_Site], b: list[_Site]) -> tuple[list[tuple[_Site, _Site]],
                                                     list[_Site], list[_Site]]:
    """Match A's sites to B's (see the module docstring): ``(pairs, only in A, only in B)``."""
    pairs: list[tuple[_Site, _Site]] = []
    left, right = list(a), list(b)

    def take(match: Any) -> None:
        for x in list(left):
            candidates = [y for y in right if match(x, y)]
            if candidates:  # the nearest line first: several copies of a line keep their order
                y = min(candidates, key=lambda y: abs(y.frame.line - x.frame.line))
                pairs.append((x, y))
                left.remove(x)
                right.remove(y)

    def same_text(x: _Site, y: _Site) -> bool:
        return x.text is not None and _code(x.text) == _code(y.text) and \
            x.frame.function == y.frame.function

    take(lambda x, y: (x.frame.file, x.frame.line) == (y.frame.file, y.frame.line)
         and (x.text is None or y.text is None or _code(x.text) == _code(y.text)))
    take(lambda x, y: x.frame.file == y.frame.file and same_text(x, y))
    take(same_text)
    return pairs, left, right


def _site_changes(a: list[_Site], b: list[_Site]) -> SiteChanges:
    pairs, only_a, only_b = _pairs(a, b)
    out = SiteChanges(
        appeared=[SiteChange(y.where, 0, y.count, text=y.text) for y in only_b],
        disappeared=[SiteChange(x.where, x.count, 0, text=x.text) for x in only_a])
    for x, y in pairs:
        if (x.frame.file, x.frame.line) != (y.frame.file, y.frame.line):
            out.moved.append(SiteChange(y.where, x.count, y.count, moved_from=x.where,
                                        text=y.text or x.text))
        elif x.count != y.count:
            out.changed.append(SiteChange(y.where, x.count, y.count, text=y.text or x.text))
    return out


def _op_changes(a: dict[str, int], b: dict[str, int]) -> OpChanges:
    return OpChanges(
        appeared=[OpChange(k, 0, b[k]) for k in sorted(b) if k not in a],
        disappeared=[OpChange(k, a[k], 0) for k in sorted(a) if k not in b],
        changed=[OpChange(k, a[k], b[k]) for k in sorted(a) if k in b and a[k] != b[k]])


#: the event kind a finding's kind is found from
_FINDING_EVENTS = {"recompile": "compile", "reuse": "compile", "sync": "sync",
                   "fallback": "fallback_exec", "graph_break": "graph_break",
                   "eager_fallback": "eager_fallback"}


def _measured(kind: str, events: set[str]) -> bool:
    return _FINDING_EVENTS.get(kind, kind) in events or kind not in _FINDING_EVENTS


def _finding_sites(report: Report, sources: SourceMap) -> dict[str, list[_Site]]:
    """Each finding kind's lines to change, as sites (count: the finding's count)."""
    out: dict[str, list[_Site]] = {}
    for f in report.findings:
        frame = Frame(f.file, f.line, f.function)
        where = location(frame, sources) if f.file else f.where
        out.setdefault(f.kind, []).append(
            _Site(frame, f.count, sources.text(f.file, f.line), where))
    return out


def _finding_changes(a: Report, b: Report, src_a: SourceMap, src_b: SourceMap,
                     measured: set[str]) -> FindingChanges:
    """Findings that appeared, disappeared or moved; a kind whose events either run does not
    collect (``measured``: the event kinds both collect) is left out."""
    fa, fb = _finding_sites(a, src_a), _finding_sites(b, src_b)
    out = FindingChanges()
    for kind in sorted(k for k in set(fa) | set(fb) if _measured(k, measured)):
        pairs, only_a, only_b = _pairs(fa.get(kind, []), fb.get(kind, []))
        out.appeared += [f"{kind} at {y.where}" for y in only_b]
        out.disappeared += [f"{kind} at {x.where}" for x in only_a]
        out.moved += [f"{kind} at {x.where} -> {y.where}" for x, y in pairs
                      if (x.frame.file, x.frame.line) != (y.frame.file, y.frame.line)]
    for names in (out.appeared, out.disappeared, out.moved):
        names.sort()
    return out


def _side(report: Report) -> Side:
    s = report.summary
    return Side(report.run_dir, s.target, list(s.args), s.backend, s.status, s.steps)


def _prefixed(prefix: str, lines: Iterable[str]) -> list[str]:
    return [f"{prefix}: {w}" for w in lines]


#: metrics that time the work: no ratio when one side did none
TIMES = frozenset({"median_step_seconds", "wall_seconds", "execute_seconds",
                   "real_tokens_per_second"})


def diff_reports(a: Report, b: Report) -> RunDiff:
    """Compare run ``b`` against run ``a`` (the baseline); see the module docstring. A run that
    did no work (``Summary.idle``) or did not end ``ok`` has times that measure nothing: they
    get no ratio, and the diff's warnings say why."""
    idle = [f"{side}: {rep.summary.idle or rep.summary.status}: its times are not comparable"
            for side, rep in (("a", a), ("b", b))
            if rep.summary.idle or rep.summary.status != "ok"]
    metrics = []
    for name, attr in METRICS:
        va, vb = _metric(a, name, attr), _metric(b, name, attr)
        delta = vb - va if va is not None and vb is not None else None
        ratio = None if idle and name in TIMES else _ratio(va, vb)
        metrics.append(MetricDelta(name, va, vb, delta, ratio))
    src_a, src_b = a.sources, b.sources
    # what both runs collect: a kind one side does not measure shows no change
    both = set(a.capabilities.events) & set(b.capabilities.events)

    def sites(kind: str) -> SiteChanges:
        if kind == "sync" and "sync" not in both:
            return SiteChanges()
        return _site_changes(_sites(a, kind, src_a), _sites(b, kind, src_b))

    return RunDiff(
        a=_side(a), b=_side(b), metrics=metrics,
        compile_sites=sites("compile"), sync_sites=sites("sync"),
        fallback_sites=sites("fallback"), break_sites=sites("graph_break"),
        fallback_ops=_op_changes(a.summary.fallback_ops, b.summary.fallback_ops),
        findings=_finding_changes(a, b, src_a, src_b, both),
        warnings=_prefixed("a", a.summary.warnings) + _prefixed("b", b.summary.warnings)
        + idle,
    )
