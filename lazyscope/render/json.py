"""The JSON report: one object, a pure function of the :class:`~lazyscope.analyze.report.Report`.

Keys: the summary's fields (``steps``, ``compiles``, ``executions`` ... ``null`` where the
backend does not measure them), ``verdict``, ``clean``, ``run_dir``, ``run_notes``,
``capabilities``, ``findings`` and ``notes`` (each: ``kind``, ``file``, ``line``, ``function``,
``stack``, ``count``, ``steps``, ``step_count``, ``seconds``, ``detail``, ``fix``; recompile
findings also ``compiled_at`` and ``changes``), ``events`` (grouped by site and cause),
``compilations`` (the first rows) and ``compilations_total``, ``per_step`` (every step up to
the series' point limit; beyond it each entry is a bucket of ``steps`` steps), ``advice`` when
the run recompiles on a varying sequence length, ``profile`` when one was captured.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from lazyscope.analyze.report import Report


def _per_step(report: Report) -> list[dict[str, Any]]:
    s = report.series
    out = []
    execute = s.execute_s
    steps = report.steps
    if not s.bucketed:
        transfers = steps.col("from_device_count")
        execs = steps.col("execute_count")
        for i in range(len(s.step)):
            out.append({
                "step": int(s.step[i]), "wall_s": float(s.wall_mean[i]),
                "compiles": int(s.compiles[i]), "compile_s": float(s.compile_s[i]),
                "executions": int(execs[i]) if execs is not None else None,
                "execute_s": float(execute[i]) if execute is not None else None,
                "transfers_from_device": int(transfers[i]) if transfers is not None else None,
                "syncs": int(report.syncs_per_step[i]) if i < len(report.syncs_per_step) else 0,
            })
        return out
    for i in range(len(s.step)):
        out.append({
            "step": int(s.step[i]), "steps": int(s.size[i]),
            "wall_s": float(s.wall_mean[i]), "wall_s_min": float(s.wall_min[i]),
            "wall_s_max": float(s.wall_max[i]), "compiles": int(s.compiles[i]),
            "compile_s": float(s.compile_s[i]),
            "execute_s": float(execute[i]) if execute is not None else None,
        })
    return out


def report_dict(report: Report) -> dict[str, Any]:
    """The report as a JSON-able dict (see the module docstring)."""
    out = report.summary.to_json()
    info = out.pop("info", None) or {}
    if info.get("runtime_counts"):
        out["runtime_counts"] = info["runtime_counts"]
    out.update({
        "run_dir": report.run_dir,
        "verdict": report.verdict,
        "clean": report.clean,
        "run_notes": report.run_notes,
        "capabilities": report.capabilities.to_json(),
        "findings": [f.to_json() for f in report.findings],
        "notes": [f.to_json() for f in report.notes],
        "events": [asdict(g) for g in report.groups],
        "compilations": report.compilations,
        "compilations_total": report.compilations_total,
        "per_step": _per_step(report),
        "per_step_bucketed": report.series.bucketed,
    })
    if report.advice is not None:
        out["advice"] = report.advice
    if report.profile is not None:
        out["profile"] = report.profile
    out.update({k: v for k, v in report.extra.items() if k != "text_sections"})
    return out


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=True, default=str)
