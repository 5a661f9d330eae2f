"""What changed between two runs: per-metric deltas and ratios, and sites that came or went.

``diff_runs(a, b) -> dict``. Pure: no I/O, no printing (:mod:`lazyscope.render.diff` renders it).

The dict has:

* ``a`` / ``b``: each run's ``run_dir``, ``target``, ``args``, ``backend``, ``status``, ``steps``;
* ``metrics``: a list of ``{"name", "a", "b", "delta", "ratio"}`` (``delta = b - a``;
  ``ratio = b / a``, ``None`` when ``a`` is 0) for compilations, compilations after warm-up,
  compile seconds, executions, execute seconds, transfers both ways, CPU-fallback executions,
  median step seconds (after warm-up) and wall seconds;
* ``compile_sites`` / ``sync_sites`` / ``fallback_sites``: events of that kind grouped by user
  site ``file:line``, as ``{"appeared": [...], "disappeared": [...], "changed": [...]}``; each
  entry ``{"site", "a", "b"}`` with the event counts in each run;
* ``fallback_ops``: the same shape, keyed by op name, with execution counts;
* ``warnings``: each run's load warnings, prefixed with ``a:`` / ``b:``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lazyscope.analyze.summary import summarize
from lazyscope.model import Run

#: (name in the diff, key in summarize(); "" = computed here)
METRICS: list[tuple[str, str]] = [
    ("steps", "steps"),
    ("compiles", "compiles"),
    ("compiles_after_warmup", "compiles_after_warmup"),
    ("distinct_graphs", "distinct_graphs"),
    ("compile_seconds", "compile_seconds"),
    ("executions", "executions"),
    ("execute_seconds", "execute_seconds"),
    ("transfers_to_device", "transfers_to_device"),
    ("transfers_from_device", "transfers_from_device"),
    ("fallback_executions", ""),
    ("median_step_seconds", "median_step_seconds"),
    ("wall_seconds", "wall_seconds"),
]


def _ratio(a: float, b: float) -> float | None:
    return None if a == 0 else b / a


def _site_counts(run: Run, kind: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for e in run.events:
        if e.kind == kind:
            counts[f"{e.site.file}:{e.site.line}" if e.site else "unknown site"] += 1
    return counts


def _set_diff(a: Counter[str] | dict[str, int], b: Counter[str] | dict[str, int]) -> dict[str, Any]:
    appeared = [{"site": k, "a": 0, "b": b[k]} for k in sorted(b) if k not in a]
    disappeared = [{"site": k, "a": a[k], "b": 0} for k in sorted(a) if k not in b]
    changed = [{"site": k, "a": a[k], "b": b[k]} for k in sorted(a) if k in b and a[k] != b[k]]
    return {"appeared": appeared, "disappeared": disappeared, "changed": changed}


def _side(run: Run, summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_dir": str(run.path),
        "target": summary["target"],
        "args": summary["args"],
        "backend": summary["backend"],
        "status": summary["status"],
        "steps": summary["steps"],
    }


def diff_runs(a: Run, b: Run) -> dict[str, Any]:
    """Compare run ``b`` against run ``a`` (the baseline); see the module docstring."""
    sa, sb = summarize(a), summarize(b)
    metrics = []
    for name, key in METRICS:
        if key:
            va, vb = sa[key], sb[key]
        else:
            va, vb = sum(sa["fallback_ops"].values()), sum(sb["fallback_ops"].values())
        metrics.append({"name": name, "a": va, "b": vb, "delta": vb - va, "ratio": _ratio(va, vb)})
    by_op = _set_diff(sa["fallback_ops"], sb["fallback_ops"])
    fallback_ops = {k: [{"op": e["site"], "a": e["a"], "b": e["b"]} for e in v]
                    for k, v in by_op.items()}
    return {
        "a": _side(a, sa),
        "b": _side(b, sb),
        "metrics": metrics,
        "compile_sites": _set_diff(_site_counts(a, "compile"), _site_counts(b, "compile")),
        "sync_sites": _set_diff(_site_counts(a, "sync"), _site_counts(b, "sync")),
        "fallback_sites": _set_diff(_site_counts(a, "fallback"), _site_counts(b, "fallback")),
        "fallback_ops": fallback_ops,
        "warnings": [f"a: {w}" for w in a.warnings] + [f"b: {w}" for w in b.warnings],
    }
