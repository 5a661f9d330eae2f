"""The report: everything lazyscope says about a run, computed once.

``build_report(run) -> Report`` runs every analysis one time; every view (text, JSON, HTML,
plots, TensorBoard scalars, ``check``, ``diff``) is a function of the :class:`Report`. Long runs
stay cheap: the analyses are linear in steps and events, and the per-step series the views draw
is downsampled to at most :data:`MAX_POINTS` points (min / mean / max per bucket).
Pure: no I/O, no printing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lazyscope.analyze.breaks import eager_fallbacks, graph_breaks
from lazyscope.analyze.buckets import advice_if_recompiling
from lazyscope.analyze.events import EventGroup, event_groups, id_counts
from lazyscope.analyze.fallbacks import FallbackOp, fallback_ops
from lazyscope.analyze.findings import Finding, make_findings
from lazyscope.analyze.recompiles import SiteCompiles, explain_recompiles, library_compiles
from lazyscope.analyze.summary import Summary, summarize
from lazyscope.analyze.syncs import SyncSite, sync_sites, syncs_per_step
from lazyscope.model import OWNER_LIBRARY, Capabilities, Run, StepTable, user_site
from lazyscope.wording import plural, say

#: points drawn or listed per step series; longer runs are bucketed
MAX_POINTS = 2000
#: rows of the compilations table
MAX_COMPILE_ROWS = 200


@dataclass
class Series:
    """The per-step series, bucketed when the run has more than MAX_POINTS steps: point ``i``
    covers steps ``step[i] .. step[i] + size[i] - 1``."""

    step: np.ndarray
    size: np.ndarray
    wall_mean: np.ndarray
    wall_min: np.ndarray
    wall_max: np.ndarray
    compiles: np.ndarray
    compile_s: np.ndarray
    execute_s: np.ndarray | None
    transfer_s: np.ndarray | None
    cumulative_s: np.ndarray

    @property
    def bucketed(self) -> bool:
        return bool(len(self.size)) and int(self.size.max()) > 1


@dataclass
class Report:
    run_dir: str
    summary: Summary
    verdict: str
    clean: bool
    findings: list[Finding]
    notes: list[Finding]
    run_notes: list[str]
    capabilities: Capabilities
    recompiles: list[SiteCompiles]
    syncs: list[SyncSite]
    fallbacks: list[FallbackOp]
    groups: list[EventGroup]
    compilations: list[dict[str, Any]]
    compilations_total: int
    series: Series
    steps: StepTable
    syncs_per_step: np.ndarray
    advice: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: how a notebook shows a report: ``{"html": ..., "text": ...}``, registered by
    #: lazyscope.render when it is imported (this layer does not import render)
    notebook_views: ClassVar[dict[str, Callable[[Report], str]]] = {}

    @property
    def backend(self) -> str:
        return self.summary.backend

    def _repr_html_(self) -> str | None:
        """Jupyter's rich display: the HTML report as a fragment (no page, scoped CSS)."""
        view = Report.notebook_views.get("html")
        return view(self) if view is not None else None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain display: the text report, not the dataclass fields."""
        view = Report.notebook_views.get("text")
        printer.text(view(self) if view is not None else f"<Report of {self.run_dir}>")


def _bucket(values: np.ndarray, size: int, how: str) -> np.ndarray:
    n = len(values)
    full = n // size * size
    parts = []
    if full:
        block = values[:full].reshape(-1, size)
        parts.append(getattr(block, how)(axis=1))
    if n > full:
        parts.append(np.array([getattr(values[full:], how)()]))
    return np.concatenate(parts) if parts else np.zeros(0)


def step_series(steps: StepTable, max_points: int = MAX_POINTS) -> Series:
    """The series the views draw, bucketed to at most ``max_points`` points."""
    n = len(steps)
    wall = steps.values("wall_s")
    size = max(1, -(-n // max_points))
    starts = np.arange(0, n, size)
    sizes = np.minimum(size, n - starts)
    execute = steps.col("execute_s")
    transfer = None
    to_s, from_s = steps.col("to_device_s"), steps.col("from_device_s")
    if to_s is not None or from_s is not None:
        transfer = (to_s if to_s is not None else 0) + (from_s if from_s is not None else 0)
    cumulative = np.cumsum(wall)
    return Series(
        step=starts, size=sizes,
        wall_mean=_bucket(wall, size, "mean"), wall_min=_bucket(wall, size, "min"),
        wall_max=_bucket(wall, size, "max"),
        compiles=_bucket(steps.values("compile_count"), size, "sum"),
        compile_s=_bucket(steps.values("compile_s"), size, "sum"),
        execute_s=_bucket(execute, size, "sum") if execute is not None else None,
        transfer_s=_bucket(np.asarray(transfer, dtype=float), size, "sum")
        if transfer is not None else None,
        cumulative_s=cumulative[np.minimum(starts + sizes, n) - 1] if n else np.zeros(0),
    )


def _compilation_rows(run: Run, limit: int) -> tuple[list[dict[str, Any]], int]:
    ev = run.events
    idx = ev.indices("compile")
    rows = []
    for i in idx[:limit]:
        e = ev.event(int(i))
        site = user_site(e.stack)
        rows.append({"step": e.step, "seconds": e.seconds, "graph": e.key[:16],
                     "phase": e.data.phase if e.data else "", "cause": e.data.cause if e.data
                     else "", "owner": e.data.owner if e.data else "",
                     "site": str(site) if site else ""})
    return rows, len(idx)


def _distinct_graphs(run: Run) -> int:
    ev = run.events
    sel = ev.indices("compile")
    keys = ev.key[sel]
    return int(len(id_counts(keys[keys != 0])[0]) + np.count_nonzero(keys == 0))


def verdict(report_backend: str, summary: Summary, findings: list[Finding],
            notes: list[Finding], sites: list[SiteCompiles]) -> tuple[str, bool]:
    """One line that says what matters most, and whether the run is clean."""
    b = report_backend
    prefix = ""
    if not summary.complete:
        prefix = f"incomplete run ({summary.steps} finished steps): "
    elif summary.status != "ok":
        prefix = f"run {summary.status} after {summary.steps} steps: "
    recompiles = [f for f in findings if f.kind == "recompile"]
    compiles = summary.compiles if summary.compiles is not None else sum(
        s.compiles for s in sites)
    if summary.info.get("eager_mode") and b == "xla":
        main = say(b, "verdict_eager_mode", compiles=compiles, executions=summary.executions)
    elif recompiles:
        count = sum(f.count for f in recompiles)
        main = say(b, "verdict_recompiling", count=count, s=plural(count),
                   sites=len(recompiles), ss=plural(len(recompiles)),
                   what=recompiles[0].detail.split("; ", 1)[-1].split(" (", 1)[0]
                   if "; " in recompiles[0].detail else recompiles[0].where)
    elif summary.steps == 0 and not compiles:
        main = say(b, "verdict_no_steps")
    elif not compiles and b in ("eager", "compile"):
        main = say(b, "verdict_no_compile")
    elif notes and any(n.kind == "recompile" for n in notes):
        k = sum(1 for n in notes if n.kind == "recompile")
        main = say(b, "verdict_only_notes", compiles=compiles, s=plural(compiles), notes=k,
                   ns=plural(k))
    else:
        main = say(b, "verdict_clean", compiles=compiles, s=plural(compiles))
    extras = []
    if summary.steps == 0 and compiles and b != "xla":
        extras.append(say(b, "verdict_no_steps"))
    if summary.fallback_ops:
        n = sum(summary.fallback_ops.values())
        extras.append(say(b, "extra_fallbacks", n=n, ops=", ".join(summary.fallback_ops)))
    syncing = [f for f in findings if f.kind == "sync"]
    if syncing:
        n = sum(f.count for f in syncing)
        extras.append(say(b, "extra_syncs", n=n))
    breaks = [f for f in findings if f.kind == "graph_break"]
    if breaks:
        extras.append(say(b, "extra_breaks", n=len(breaks), s=plural(len(breaks))))
    eager = [f for f in findings if f.kind == "eager_fallback"]
    if eager:
        extras.append(say(b, "extra_eager", n=len(eager), s=plural(len(eager))))
    clean = not findings and summary.status == "ok" and summary.complete
    return prefix + main + (f"; {'; '.join(extras)}" if extras else ""), clean


def build_report(run: Run, *, warmup_steps: int | None = None) -> Report:
    """Every analysis of ``run``, once. ``warmup_steps`` overrides the run's warm-up (every
    compilation from that step on counts as a recompilation)."""
    if warmup_steps is not None:
        run.meta.warmup_steps = warmup_steps
    b = run.meta.backend
    sites = explain_recompiles(run)
    syncs = sync_sites(run)
    fallbacks = fallback_ops(run)
    breaks = graph_breaks(run)
    eagers = eager_fallbacks(run)
    summary = summarize(run, library_compiles=library_compiles(run.events),
                        distinct_graphs=_distinct_graphs(run),
                        backward_seconds=sum(s.backward_seconds for s in sites))
    findings, notes = make_findings(
        b, sites=sites, syncs=syncs, fallbacks=fallbacks, breaks=breaks, eagers=eagers,
        steps=len(run.steps), graph_shapes=bool(run.meta.info.get("graph_shapes", True)),
        wall_seconds=summary.wall_seconds)
    text, clean = verdict(b, summary, findings, notes, sites)
    rows, total = _compilation_rows(run, MAX_COMPILE_ROWS)

    notes_text = list(run.meta.notes) + list(run.meta.capabilities.notes)
    lib_syncs = [s for s in syncs if s.owner == OWNER_LIBRARY]
    if lib_syncs:
        notes_text.append(
            "library syncs (not findings): " + "; ".join(
                f"{s.count} read(s) by {s.library_call or 'library code'} called at "
                f"{s.site.file}:{s.site.line}" if s.site else f"{s.count} read(s)"
                for s in lib_syncs[:3]))
    if summary.library_compiles:
        notes_text.append(f"{summary.library_compiles} graph(s) compiled by the backend for its own "
                          "bookkeeping (not the program's; not findings)"
                          if b == "xla" else
                          f"{summary.library_compiles} graph(s) compiled by library code")
    return Report(
        run_dir=str(run.path), summary=summary, verdict=text, clean=clean, findings=findings,
        notes=notes, run_notes=notes_text, capabilities=run.meta.capabilities,
        recompiles=sites, syncs=syncs, fallbacks=fallbacks, groups=event_groups(run.events),
        compilations=rows, compilations_total=total, series=step_series(run.steps),
        steps=run.steps, syncs_per_step=syncs_per_step(run),
        advice=advice_if_recompiling(run, sites), profile=run.meta.info.get("profile"),
    )
