"""The JSON report: ``summarize(run)`` plus the per-step series, as one JSON object."""

from __future__ import annotations

import json
from typing import Any

from lazyscope.analyze.summary import summarize, verdict
from lazyscope.model import Run


def report_dict(run: Run) -> dict[str, Any]:
    """The report as a dict: the summary's keys, ``verdict``, ``run_dir`` and ``per_step``."""
    summary = summarize(run)
    summary["verdict"] = verdict(summary)
    summary["run_dir"] = str(run.path)
    summary["notes"] = list(run.meta.info.get("notes", []) or [])
    summary["per_step"] = [
        {
            "step": s.index,
            "wall_s": s.wall_s,
            "compiles": s.compile_count,
            "compile_s": s.compile_s,
            "executions": s.execute_count,
            "transfers_from_device": s.from_device_count,
        }
        for s in run.steps
    ]
    # issue 4: ranked findings (recompile / sync / fallback), each with a fix
    from lazyscope.analyze.findings import findings

    summary["findings"] = findings(run)
    # issue 3: bucket advice for runs that recompile on a varying sequence length
    from lazyscope.analyze.buckets import advice_if_recompiling

    advice = advice_if_recompiling(run)
    if advice is not None:
        summary["advice"] = advice
    return summary


def render_json(run: Run) -> str:
    return json.dumps(report_dict(run), indent=2, sort_keys=True, default=str)
