"""Multi-process runs: one report for the ranks of ``RUN/rank<N>/``.

A multi-process run is a directory whose ``rank<N>/`` subdirectories are runs (one per worker
of an XLA launch (``launch`` / ``xmp.spawn``), or per process of a launcher that sets ``RANK``),
with or without the spawning parent's own ``meta.json`` beside them.

The merged report is built from each rank's report (each built once):

* the summary, steps and plots are rank 0's (the lowest rank), and ``Report.ranks`` has one row
  per rank side by side (:class:`~lazyscope.analyze.report.RankRow`);
* findings are merged by (kind, line) with the ranks they occur on (``Finding.ranks``); a rank other
  than local rank 0 has no source lines for its compilations (the XLA backend writes its analysis on
  local rank 0 only), so its recompile findings join rank 0's when rank 0 has one;
* divergence is flagged: a rank that compiles graphs the others do not (by graph content), or
  whose median step is far from the median rank's (a straggler): the classic causes of
  collective hangs and slow steps.

Pure: no I/O beyond what the caller loaded.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from lazyscope.analyze.findings import Finding, SourceLookup
from lazyscope.analyze.report import RankRow, Report, build_report
from lazyscope.analyze.wording import plural, say
from lazyscope.model import Compile, RankedRun, Run

#: a rank whose median step is this many times the other ranks' median, and at least
#: STRAGGLER_MARGIN_S slower, is a straggler
STRAGGLER_RATIO = 1.5
STRAGGLER_MARGIN_S = 0.010
#: a median over fewer steps than this is no evidence of a straggler (two hosts of a 4-step run
#: sharing a loaded machine read 3.75x apart)
STRAGGLER_MIN_STEPS = 8


def stragglers(medians: dict[int, tuple[float | None, int]]
               ) -> list[tuple[int, float, float]]:
    """``(owner, its median step, the others' median)`` of each rank or host whose median step
    is at least :data:`STRAGGLER_RATIO` times and :data:`STRAGGLER_MARGIN_S` over the median of
    the others' medians. ``medians``: owner -> (median step, the steps it covers); a median over
    fewer than :data:`STRAGGLER_MIN_STEPS` steps is left out."""
    judged = {q: m for q, (m, n) in medians.items() if m and n >= STRAGGLER_MIN_STEPS}
    out = []
    for owner, m in judged.items():
        peers = [v for q, v in judged.items() if q != owner]
        if not peers:
            continue
        mid = statistics.median(peers)
        if mid and m / mid >= STRAGGLER_RATIO and m - mid >= STRAGGLER_MARGIN_S:
            out.append((owner, m, mid))
    return out


def graph_digests(run: Run) -> set[str]:
    """The content digests of the graphs a run compiled (its own, not a library's)."""
    ev = run.events
    out: set[str] = set()
    for pid in np.unique(ev.payload[ev.indices("compile")]):
        data: Compile | None = ev.payload_of(int(pid))
        if data is not None and data.digest and data.owner == "user":
            out.add(data.digest)
    return out


def merge_findings(by_owner: dict[int, list[Finding]], owners: Literal["ranks", "hosts"], *,
                   anchor_recompiles: bool = False) -> list[Finding]:
    """The findings of several processes (``owners``: ``ranks`` or ``hosts``, the field that
    lists them), one per kind and line, with counts and seconds summed, most expensive first.
    ``anchor_recompiles``: a recompile finding with no line joins the first owner's recompile
    finding when it has exactly one."""
    merged: dict[tuple[Any, ...], Finding] = {}
    first = min(by_owner) if by_owner else 0
    lead_recompiles = [f for f in by_owner.get(first, []) if f.kind == "recompile"] \
        if anchor_recompiles else []
    for owner in sorted(by_owner):
        for f in by_owner[owner]:
            key = (f.kind, f.file, f.line, getattr(f.facts, "op", None))
            if f.kind == "recompile" and not f.file and len(lead_recompiles) == 1:
                key = (f.kind, lead_recompiles[0].file, lead_recompiles[0].line, None)
            if key not in merged:
                merged[key] = (replace(f, ranks=[owner]) if owners == "ranks"
                               else replace(f, hosts=[owner]))
                continue
            m = merged[key]
            listed = getattr(m, owners)
            assert listed is not None
            listed.append(owner)
            m.count += f.count
            m.seconds += f.seconds
    out = list(merged.values())
    out.sort(key=lambda f: (-f.seconds, -f.count))
    return out


def build_ranked_report(ranked: RankedRun, *, warmup_steps: int | None = None,
                        sources: SourceLookup | None = None) -> Report:
    """One report for all ranks (see the module docstring)."""
    reports = {r: build_report(run, warmup_steps=warmup_steps, sources=sources)
               for r, run in sorted(ranked.ranks.items())}
    lead_rank = min(reports)
    lead = reports[lead_rank]
    backend = lead.backend
    rows: list[RankRow] = []
    digests = {r: graph_digests(run) for r, run in ranked.ranks.items()}
    medians = {r: (rep.summary.median_step_seconds, rep.summary.median_step_steps)
               for r, rep in reports.items()}
    divergence: list[str] = []
    for r, rep in reports.items():
        s = rep.summary
        others = set().union(*(d for q, d in digests.items() if q != r)) if len(digests) > 1 \
            else set()
        own = digests[r] - others if len(digests) > 1 else set()
        rows.append(RankRow(rank=r, status=s.status, steps=s.steps, compiles=s.compiles,
                            distinct_graphs=s.distinct_graphs,
                            median_step_s=s.median_step_seconds, wall_s=s.wall_seconds,
                            findings=len(rep.findings), graphs_only_here=len(own)))
        if own:
            divergence.append(say(backend, "rank_diverges_graphs", rank=r,
                                      graphs=f"{len(own)} graph{plural(len(own))}"))
    for r, m, mid in stragglers(medians):
        divergence.append(say(backend, "rank_diverges_time", rank=r, ratio=m / mid))
    findings = merge_findings({r: rep.findings for r, rep in reports.items()}, "ranks",
                              anchor_recompiles=True)
    notes = merge_findings({r: rep.notes for r, rep in reports.items()}, "ranks",
                           anchor_recompiles=True)
    statuses = {rep.summary.status for rep in reports.values()}
    summary = lead.summary
    if ranked.parent is not None:
        summary = replace(summary, target=ranked.parent.target, args=list(ranked.parent.args),
                          target_kind=ranked.parent.target_kind)
    if statuses != {"ok"}:
        worst = next((s for s in ("running", "incomplete", "no_space", "failed",
                                  "interrupted", "ok") if s in statuses), sorted(statuses)[0])
        writer = next((rep.summary.being_written_by for rep in reports.values()
                       if rep.summary.being_written_by is not None), None)
        summary = replace(summary, status=worst,
                          complete=worst not in ("incomplete", "running"),
                          being_written_by=writer)
    verdict = f"{len(reports)} ranks; rank {lead_rank}: {lead.verdict}"
    if divergence:
        verdict += "; " + "; ".join(divergence)
    run_notes = list(lead.run_notes) + [
        f"{len(reports)} ranks in {ranked.path}: the summary, steps and plots are rank "
        f"{lead_rank}'s; see the ranks table"]
    return replace(
        lead, run_dir=str(ranked.path), summary=summary, verdict=verdict,
        clean=lead.clean and not divergence and all(rep.clean for rep in reports.values()),
        findings=findings, notes=notes, run_notes=run_notes, ranks=rows,
        divergence=divergence)


def build_any(target: Run | RankedRun, *, warmup_steps: int | None = None,
              sources: SourceLookup | None = None) -> Report:
    """The report of a run or of a multi-process run (``store.load_target``)."""
    if isinstance(target, RankedRun):
        return build_ranked_report(target, warmup_steps=warmup_steps, sources=sources)
    return build_report(target, warmup_steps=warmup_steps, sources=sources)
