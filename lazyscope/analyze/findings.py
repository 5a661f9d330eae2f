"""The findings: what to fix first, ranked by estimated time cost, each with a concrete fix.

``findings(run)`` merges the three analyzers into plain dicts (the JSON report's ``findings``)::

    {"kind": "recompile" | "sync" | "fallback", "file", "line", "function", "count", "steps",
     "seconds", "detail", "fix"}

* recompile: a call site with compilations after warm-up (``meta.warmup_steps``), counted as in
  ``recompiles.py``; seconds = their compile time; count = those compilations.
* sync: a source line that read tensor values in two or more steps; seconds = the host's stall
  time in those reads; count = reads.
* fallback: an op that ran on the CPU; seconds = estimated CPU time; count = executions.

Pure function: no I/O.
"""

from __future__ import annotations

from typing import Any

from lazyscope.analyze.fallbacks import fallback_ops
from lazyscope.analyze.recompiles import explain_recompiles, recompile_fix
from lazyscope.analyze.syncs import sync_sites
from lazyscope.model import Run, Site


def _where(site: Site | None) -> dict[str, Any]:
    if site is None:
        return {"file": "", "line": 0, "function": ""}
    return {"file": site.file, "line": site.line, "function": site.function}


def findings(run: Run) -> list[dict[str, Any]]:
    """Every finding of the run, the most expensive first."""
    out: list[dict[str, Any]] = []
    for entry in explain_recompiles(run):
        if not entry.counted:
            continue
        examples = [f"step {r.step}: {'; '.join(r.diff[:3])}" for r in entry.recompiles
                    if r.counted][:3]
        out.append({
            "kind": "recompile", **_where(entry.site), "count": entry.counted,
            "steps": entry.counted_steps, "seconds": entry.counted_seconds,
            "detail": entry.summary() + (" (" + "; ".join(examples) + ")" if examples else ""),
            "varying": [{"input": v.input, "dim": v.dim, "values": v.values}
                        for v in entry.varying],
            "fix": recompile_fix(entry) if run.meta.info.get("graph_shapes", True) else (
                "this run was traced with --no-graph-shapes: trace it again without that flag "
                "to see which input or dimension changes between these graphs"),
        })
    for site in sync_sites(run):
        if not site.recurring:
            continue
        out.append({
            "kind": "sync", **_where(site.site), "count": site.count, "steps": site.steps,
            "seconds": site.seconds, "detail": site.detail(), "fix": site.fix(),
        })
    for op in fallback_ops(run):
        out.append({
            "kind": "fallback", **_where(op.site), "count": op.count, "steps": op.steps,
            "seconds": op.seconds, "op": op.op, "detail": op.detail(), "fix": op.fix(),
        })
    out.sort(key=lambda f: (-f["seconds"], -f["count"]))
    return out
