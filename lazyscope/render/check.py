"""Text and JSON of a ``lazyscope check`` result (:mod:`lazyscope.analyze.check`).

``CHECK_RENDERERS[fmt](result) -> str``: each violated rule on a ``FAIL`` line with its evidence
indented below it, each rule that held on an ``ok`` line, then one ``result:`` line.
"""

from __future__ import annotations

from collections.abc import Callable

from lazyscope.analyze.check import CheckResult
from lazyscope.core.units import counted
from lazyscope.render.json import dumps


def render_check_text(result: CheckResult) -> str:
    lines = [f"lazyscope check: {result.run_dir} (status {result.status}, {result.steps} steps)"
             + (f" against the baseline {result.baseline}" if result.baseline else "")]
    for note in result.notes:
        lines.append(f"  note: {note}")
    broken = {v.rule for v in result.violations}
    for v in result.violations:
        lines.append(f"FAIL {v.rule}: {v.message}")
        lines += [f"    {e}" for e in v.evidence]
    for rid, text in result.rules:
        if rid not in broken:
            lines.append(f"ok   {rid}: {text}")
    if result.passed:
        lines.append(f"result: PASS ({counted(len(result.rules), 'rule')} checked)")
    else:
        lines.append(f"result: FAIL ({counted(len(broken), 'rule')} violated: {', '.join(sorted(broken))})")
    return "\n".join(lines) + "\n"


def render_check_json(result: CheckResult) -> str:
    return dumps(result) + "\n"


CHECK_RENDERERS: dict[str, Callable[[CheckResult], str]] = {
    "text": render_check_text,
    "json": render_check_json,
}
