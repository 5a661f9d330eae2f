"""Group a run's events by kind, place and cause: one row per distinct (kind, site, cause).

Backend-neutral: XLA compile events (``data.cause``), dynamo compile events (``data.cause``,
``data.recompile_reason``), graph breaks (``data.reason``) and CUDA host syncs
(``data.message``) all group the same way. Pure function: no I/O, no printing.
"""

from __future__ import annotations

from typing import Any

from lazyscope.model import Event, Run

#: event kinds listed in the report, in this order
KINDS = ("compile", "compile_backward", "graph_break", "sync")


def event_cause(event: Event) -> str:
    """The one-line cause of an event: a recompile's guard failure, a graph break's reason."""
    data = event.data
    for key in ("recompile_reason", "reason", "cause", "message"):
        value = data.get(key)
        if value:
            text = str(value).strip().splitlines()[0]
            if key == "recompile_reason":
                text = f"guard failed: {text}"
            return text
    return ""


def event_groups(run: Run) -> list[dict[str, Any]]:
    """Rows ``{kind, site, cause, count, seconds, steps}`` sorted by kind, then count."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in run.events:
        if event.kind not in KINDS:
            continue
        site = str(event.site) if event.site else "?"
        cause = event_cause(event)
        row = groups.setdefault((event.kind, site, cause), {
            "kind": event.kind, "site": site, "cause": cause, "count": 0, "seconds": 0.0,
            "steps": [],
        })
        row["count"] += 1
        row["seconds"] += event.seconds
        if event.step not in row["steps"]:
            row["steps"].append(event.step)
    return sorted(groups.values(), key=lambda r: (KINDS.index(r["kind"]), -r["count"]))
