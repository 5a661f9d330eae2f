"""Text and JSON of a run diff (:func:`lazyscope.analyze.diff.diff_runs`).

``DIFF_RENDERERS[fmt](diff) -> str``. The text is a metric table (A, B, B-A, B/A), then the
compile, sync and fallback sites and fallback ops that appeared, disappeared or changed count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lazyscope.units import seconds as fmt_seconds

_SECONDS = {"compile_seconds", "execute_seconds", "median_step_seconds", "wall_seconds"}


def _value(name: str, v: Any) -> str:
    if v is None:
        return "-"
    if name in _SECONDS:
        return fmt_seconds(v) if v >= 0 else "-" + fmt_seconds(-v)
    return str(v)


def _sites(title: str, d: dict[str, list[dict[str, Any]]], key: str = "site") -> list[str]:
    if not any(d.values()):
        return [f"{title}: no change"]
    lines = [f"{title}:"]
    for e in d["appeared"]:
        lines.append(f"  + {e[key]}  (B: {e['b']})")
    for e in d["disappeared"]:
        lines.append(f"  - {e[key]}  (A: {e['a']})")
    for e in d["changed"]:
        lines.append(f"  ~ {e[key]}  (A: {e['a']} -> B: {e['b']})")
    return lines


def render_diff_text(diff: dict[str, Any]) -> str:
    lines = []
    for side in ("a", "b"):
        s = diff[side]
        args = " ".join(s["args"])
        lines.append(
            f"{side.upper()}: {s['run_dir']}  ({s['target']} {args}; {s['backend']}, "
            f"{s['status']}, {s['steps']} steps)"
        )
    for w in diff["warnings"]:
        lines.append(f"  warning {w}")
    lines += ["", f"  {'metric':<24} {'A':>12} {'B':>12} {'B-A':>12} {'B/A':>8}"]
    for m in diff["metrics"]:
        ratio = "-" if m["ratio"] is None else f"{m['ratio']:.2f}x"
        lines.append(
            f"  {m['name']:<24} {_value(m['name'], m['a']):>12} {_value(m['name'], m['b']):>12} "
            f"{_value(m['name'], m['delta']):>12} {ratio:>8}"
        )
    lines.append("")
    lines += _sites("compile sites (+ only in B, - only in A)", diff["compile_sites"])
    lines += _sites("sync sites", diff["sync_sites"])
    lines += _sites("fallback sites", diff["fallback_sites"])
    lines += _sites("graph break sites", diff["break_sites"])
    lines += _sites("fallback ops", diff["fallback_ops"], key="op")
    found = diff["findings"]
    if found["appeared"] or found["disappeared"]:
        lines.append("findings:")
        lines += [f"  + {f}" for f in found["appeared"]]
        lines += [f"  - {f}" for f in found["disappeared"]]
    else:
        lines.append("findings: no change")
    return "\n".join(lines) + "\n"


def render_diff_json(diff: dict[str, Any]) -> str:
    return json.dumps(diff, indent=2, sort_keys=True, default=str) + "\n"


DIFF_RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "text": render_diff_text,
    "json": render_diff_json,
}
