"""What changed between two runs: per-metric deltas and ratios, and sites that came or went.

``diff_reports(a, b) -> dict``. Pure: no I/O, no printing (:mod:`lazyscope.render.diff`
renders it). Both sides are :class:`~lazyscope.analyze.report.Report` s, built once each.

The dict has:

* ``a`` / ``b``: each run's ``run_dir``, ``target``, ``args``, ``backend``, ``status``, ``steps``;
* ``metrics``: a list of ``{"name", "a", "b", "delta", "ratio"}`` (``delta = b - a``;
  ``ratio = b / a``, ``None`` when ``a`` is 0 or either side does not measure it) for
  compilations, recompilations, distinct graphs, compile and execute seconds, executions,
  transfers both ways, host syncs, CPU-fallback executions, graph breaks, median step seconds
  and wall seconds;
* ``compile_sites`` / ``sync_sites`` / ``fallback_sites`` / ``break_sites``: events of that kind
  grouped by ``file:line``, as ``{"appeared": [...], "disappeared": [...], "changed": [...]}``;
  each entry ``{"site", "a", "b"}`` with the event counts in each run;
* ``fallback_ops``: the same shape, keyed by op name, with execution counts;
* ``findings``: recompile/sync/fallback/graph-break findings (``kind`` at ``file:line``) that
  appeared or disappeared;
* ``warnings``: each run's load warnings, prefixed with ``a:`` / ``b:``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lazyscope.analyze.report import Report

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
]


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def _metric(report: Report, name: str, attr: str) -> Any:
    s = report.summary
    if attr:
        return getattr(s, attr)
    if name == "recompiles":
        return sum(f.count for f in report.findings if f.kind == "recompile")
    return sum(s.fallback_ops.values())


def _set_diff(a: Counter[str] | dict[str, int], b: Counter[str] | dict[str, int]) -> dict[str, Any]:
    appeared = [{"site": k, "a": 0, "b": b[k]} for k in sorted(b) if k not in a]
    disappeared = [{"site": k, "a": a[k], "b": 0} for k in sorted(a) if k not in b]
    changed = [{"site": k, "a": a[k], "b": b[k]} for k in sorted(a) if k in b and a[k] != b[k]]
    return {"appeared": appeared, "disappeared": disappeared, "changed": changed}


def _sites(report: Report, kind: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for g in report.groups:
        if g.kind == kind:
            counts[g.site.split(" (")[0]] += g.count
    return counts


def _side(report: Report) -> dict[str, Any]:
    s = report.summary
    return {"run_dir": report.run_dir, "target": s.target, "args": s.args,
            "backend": s.backend, "status": s.status, "steps": s.steps}


def diff_reports(a: Report, b: Report) -> dict[str, Any]:
    """Compare run ``b`` against run ``a`` (the baseline); see the module docstring."""
    metrics = []
    for name, attr in METRICS:
        va, vb = _metric(a, name, attr), _metric(b, name, attr)
        delta = vb - va if va is not None and vb is not None else None
        metrics.append({"name": name, "a": va, "b": vb, "delta": delta, "ratio": _ratio(va, vb)})
    by_op = _set_diff(a.summary.fallback_ops, b.summary.fallback_ops)
    fallback_ops = {k: [{"op": e["site"], "a": e["a"], "b": e["b"]} for e in v]
                    for k, v in by_op.items()}
    fa = {f"{f.kind} at {f.where}" for f in a.findings}
    fb = {f"{f.kind} at {f.where}" for f in b.findings}
    return {
        "a": _side(a),
        "b": _side(b),
        "metrics": metrics,
        "compile_sites": _set_diff(_sites(a, "compile"), _sites(b, "compile")),
        "sync_sites": _set_diff(_sites(a, "sync"), _sites(b, "sync")),
        "fallback_sites": _set_diff(_sites(a, "fallback"), _sites(b, "fallback")),
        "break_sites": _set_diff(_sites(a, "graph_break"), _sites(b, "graph_break")),
        "fallback_ops": fallback_ops,
        "findings": {"appeared": sorted(fb - fa), "disappeared": sorted(fa - fb)},
        "warnings": [f"a: {w}" for w in a.summary.warnings]
        + [f"b: {w}" for w in b.summary.warnings],
    }
