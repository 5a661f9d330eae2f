"""Where did torch.compile stop tracing, and which functions gave up compiling?

* Graph breaks (``graph_break`` events) grouped by the user's line and reason: how often dynamo
  broke there, in which steps, with the reason in full and dynamo's hints.
* Eager fallbacks (``eager_fallback`` events): a compiled function that hit the recompile limit
  and runs eagerly from then on: the limit, the last guard failure, the step it happened.

Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.events import distinct, group_events
from lazyscope.model import EagerFallback, Frame, GraphBreak, Run, Stack, user_frames, user_site


@dataclass
class BreakSite:
    site: Frame | None
    stack: Stack
    reason: str
    hints: list[str] = field(default_factory=list)
    kind: str = ""
    function: str = ""
    count: int = 0
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class EagerSite:
    site: Frame | None
    stack: Stack
    function: str
    limit: int | None
    last_reason: str
    step: int
    count: int


def graph_breaks(run: Run) -> list[BreakSite]:
    """One entry per (user line, reason), the most frequent first."""
    ev = run.events

    def key(stack: Stack, data: GraphBreak | None) -> tuple[Any, ...]:
        site = user_site(stack) or (stack[0] if stack else None)
        return (site.file, site.line, site.function) if site else None, \
            data.reason if data is not None else ""

    out = []
    for (where, _reason), sel in group_events(ev, "graph_break", key):
        data: GraphBreak = ev.payload_of(int(ev.payload[sel[0]])) or GraphBreak()
        stack = ev.stack_of(int(ev.stack[sel[0]]))
        out.append(BreakSite(Frame(*where) if where else None, tuple(user_frames(stack)),
                             data.reason, list(data.hints), data.kind, data.function,
                             len(sel), distinct(ev.step[sel])))
    out.sort(key=lambda b: -b.count)
    return out


def eager_fallbacks(run: Run) -> list[EagerSite]:
    """One entry per function that hit the recompile limit."""
    ev = run.events

    def key(stack: Stack, data: EagerFallback | None) -> str:
        return data.function if data is not None else ""

    out = []
    for _fn, sel in group_events(ev, "eager_fallback", key):
        first = int(sel[0])
        data: EagerFallback = ev.payload_of(int(ev.payload[first])) or EagerFallback()
        stack = ev.stack_of(int(ev.stack[first]))
        out.append(EagerSite(user_site(stack), tuple(user_frames(stack)), data.function,
                             data.limit, data.last_reason, int(ev.step[first]), len(sel)))
    return out
