"""Comparison rows: one row per run of the same workload under different policies.

Pure: ``compare_rows(named_runs) -> list[dict]`` and ``ratios(rows) -> dict``; no I/O.

Each row: ``policy``, ``path``, ``status``, ``steps``, ``compiles``, ``distinct_graphs``,
``distinct_shapes`` (padded lengths seen), ``compile_s``, ``execute_s``, ``wall_s``,
``real_tokens``, ``computed_tokens``, ``tokens_per_s`` (real tokens over wall time *including*
compilation), ``padding_efficiency`` (real / computed tokens), ``buckets`` (as the run
recorded them), ``cumulative_wall_s`` (per step, for the plot).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyscope.analyze.report import build_report
from lazyscope.model import Run


def compare_row(policy: str, run: Run) -> dict[str, Any]:
    """The comparison numbers of one run."""
    s = build_report(run).summary
    steps = run.steps
    real = sum(int(v) for v in steps.annotation("real_tokens").values())
    computed = sum(int(v) for v in steps.annotation("computed_tokens").values())
    cumulative = [round(float(t), 6) for t in np.cumsum(steps.values("wall_s"))]
    wall = s.wall_seconds
    shapes = set(steps.annotation("seq_len").values())
    return {
        "policy": policy,
        "path": str(run.path),
        "status": s.status,
        "steps": s.steps,
        "compiles": s.compiles or 0,
        "distinct_graphs": s.distinct_graphs,
        "distinct_shapes": len(shapes),
        "compile_s": s.compile_seconds or 0.0,
        "execute_s": s.execute_seconds or 0.0,
        "wall_s": wall,
        "real_tokens": real,
        "computed_tokens": computed,
        "tokens_per_s": real / wall if wall > 0 else 0.0,
        "padding_efficiency": real / computed if computed else None,
        "buckets": (run.meta.info or {}).get("buckets"),
        "cumulative_wall_s": cumulative,
    }


def compare_rows(named_runs: list[tuple[str, Run]]) -> list[dict[str, Any]]:
    """One row per ``(policy, run)``, in the given order."""
    return [compare_row(name, run) for name, run in named_runs]


def failed_row(policy: str, path: str, error: str) -> dict[str, Any]:
    """A row for a policy whose run could not be loaded at all."""
    return {"policy": policy, "path": path, "status": "failed", "error": error, "steps": 0,
            "compiles": 0, "distinct_graphs": 0, "distinct_shapes": 0, "compile_s": 0.0,
            "execute_s": 0.0, "wall_s": 0.0, "real_tokens": 0, "computed_tokens": 0,
            "tokens_per_s": 0.0, "padding_efficiency": None, "buckets": None,
            "cumulative_wall_s": []}


def ratios(rows: list[dict[str, Any]], baseline: str = "longest") -> dict[str, float]:
    """Real-tokens/s of every policy over the baseline's (and over ``max``'s), when present."""
    by = {r["policy"]: r for r in rows if r["tokens_per_s"] > 0}
    out: dict[str, float] = {}
    for base in (baseline, "max"):
        if base not in by:
            continue
        for name, r in by.items():
            if name != base and not (base == "max" and name == baseline):
                out[f"{name} / {base}"] = r["tokens_per_s"] / by[base]["tokens_per_s"]
    return out
