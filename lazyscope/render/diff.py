"""Text and JSON of a run diff (:class:`lazyscope.analyze.diff.RunDiff`).

``DIFF_RENDERERS[fmt](diff) -> str``. The text is a metric table (A, B, B-A, B/A), then the
compile, sync, fallback and graph-break sites and the fallback ops that appeared (``+``),
disappeared (``-``), changed count (``~``) or moved to another line (``>``), then the findings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lazyscope.analyze.diff import OpChanges, RunDiff, SiteChanges
from lazyscope.core.units import nbytes
from lazyscope.core.units import seconds as fmt_seconds
from lazyscope.render.json import dumps

_SECONDS = {"compile_seconds", "execute_seconds", "median_step_seconds", "wall_seconds"}


def _value(name: str, v: Any) -> str:
    if v is None:
        return "-"
    if name in _SECONDS:
        return fmt_seconds(v) if v >= 0 else "-" + fmt_seconds(-v)
    if name == "padding_efficiency":
        return f"{v:.2f}"
    if name == "real_tokens_per_second":
        return f"{v:,.0f}"
    if name == "graph_memory_bytes":
        return nbytes(v) if v >= 0 else "-" + nbytes(-v)
    return str(v)


def _sites(title: str, changes: SiteChanges | OpChanges) -> list[str]:
    if not changes:
        return [f"{title}: no change"]
    lines = [f"{title}:"]
    lines += [f"  + {c.site}  (B: {c.b})" for c in changes.appeared]
    lines += [f"  - {c.site}  (A: {c.a})" for c in changes.disappeared]
    lines += [f"  ~ {c.site}  (A: {c.a} -> B: {c.b})" for c in changes.changed]
    for c in changes.moved:
        counts = f"{c.b}" if c.a == c.b else f"A: {c.a} -> B: {c.b}"
        lines.append(f"  > {c.site}  (moved from {c.moved_from}; {counts})"
                     + (f"  {c.text}" if c.text else ""))
    return lines


def render_diff_text(diff: RunDiff) -> str:
    lines = []
    for name, s in (("A", diff.a), ("B", diff.b)):
        args = " ".join(s.args)
        lines.append(f"{name}: {s.run_dir}  ({s.target} {args}; {s.backend}, {s.status}, "
                     f"{s.steps} steps)")
    for w in diff.warnings:
        lines.append(f"  warning {w}")
    lines += ["", f"  {'metric':<24} {'A':>12} {'B':>12} {'B-A':>12} {'B/A':>8}"]
    for m in diff.metrics:
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}x"
        lines.append(
            f"  {m.name:<24} {_value(m.name, m.a):>12} {_value(m.name, m.b):>12} "
            f"{_value(m.name, m.delta):>12} {ratio:>8}"
        )
    lines.append("")
    lines += _sites("compile sites (+ only in B, - only in A, > moved)", diff.compile_sites)
    lines += _sites("sync sites", diff.sync_sites)
    lines += _sites("fallback sites", diff.fallback_sites)
    lines += _sites("graph break sites", diff.break_sites)
    lines += _sites("fallback ops", diff.fallback_ops)
    found = diff.findings
    if found.appeared or found.disappeared or found.moved:
        lines.append("findings:")
        lines += [f"  + {f}" for f in found.appeared]
        lines += [f"  - {f}" for f in found.disappeared]
        lines += [f"  > {f}" for f in found.moved]
    else:
        lines.append("findings: no change")
    return "\n".join(lines) + "\n"


def render_diff_json(diff: RunDiff) -> str:
    return dumps(diff) + "\n"


DIFF_RENDERERS: dict[str, Callable[[RunDiff], str]] = {
    "text": render_diff_text,
    "json": render_diff_json,
}
