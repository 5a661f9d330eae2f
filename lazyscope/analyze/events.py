"""Group a run's events: the one pass every analyzer shares.

:func:`group_events` splits the events of one kind into groups by a key computed from each
distinct (stack, payload) pair, so a million ``.item()`` events at one line cost one key
computation and a few numpy operations. :func:`event_groups` is the report's events table: one
row per (kind, site, cause). Pure functions: no I/O, no printing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from lazyscope.model import KIND_CODE, EventTable, Frame, Stack, user_site


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array. Event steps are recorded in order, so
    the common case is a sorted array: a diff, not numpy's hash-based ``unique`` (which took
    0.2 s per million distinct values here)."""
    if len(values) < 2:
        copy: np.ndarray = np.asarray(values).copy()
        return copy
    if not np.all(values[1:] >= values[:-1]):
        values = np.sort(values)
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _dense(ids: np.ndarray) -> int | None:
    """The size of a table indexed by ``ids`` when that is cheap (intern ids: a small range),
    else None (use a sort)."""
    if not len(ids):
        return 0
    span = int(ids.max()) + 1
    return span if span <= max(4 * len(ids), 1 << 20) else None


def id_counts(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_counts=True)`` for intern ids, linear: a bincount."""
    if _dense(ids) is None:
        return np.unique(ids, return_counts=True)
    counts = np.bincount(ids.astype(np.int64))
    uniq = np.flatnonzero(counts)
    return uniq, counts[uniq]


def id_first(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_index=True)`` for intern ids: each distinct id and the position
    of its first occurrence, linear."""
    span = _dense(ids)
    if span is None:
        return np.unique(ids, return_index=True)
    first = np.full(span, len(ids), dtype=np.int64)
    np.minimum.at(first, ids.astype(np.int64), np.arange(len(ids)))
    uniq = np.flatnonzero(first < len(ids))
    return uniq, first[uniq]


def pairs(events: EventTable, kind: str | tuple[str, ...]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(indices, stack ids, payload ids, inverse)`` for the events of ``kind`` (or of several
    kinds, in recorded order): the distinct
    (stack, payload) pairs and, per event, the number of its pair. Computed once per table and
    kind (every analyzer groups the same events by its own key). Ids are intern line numbers,
    a small range, so the pairs are found by a scatter into a table of that range (linear),
    and by numpy's sort only when the range is far larger than the events."""
    cache = events.__dict__.setdefault("_pairs_cache", {})
    hit = cache.get(kind)
    if hit is not None and hit[0] is events.kind:
        cached: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = hit[1]
        return cached
    if isinstance(kind, str):
        idx = events.indices(kind)
    else:
        idx = np.flatnonzero(np.isin(events.kind, [KIND_CODE[k] for k in kind]))
    stack, payload = events.stack[idx].astype(np.int64), events.payload[idx].astype(np.int64)
    width = int(payload.max()) + 1 if len(idx) else 1
    combo = stack * width + payload
    span = _dense(combo)
    if span is not None:
        present = np.zeros(span, dtype=bool)
        present[combo] = True
        uniq = np.flatnonzero(present)
        number = np.zeros(span, dtype=np.int64)
        number[uniq] = np.arange(len(uniq))
        inverse = number[combo]
    else:
        uniq, inverse = np.unique(combo, return_inverse=True)
    result = (idx, uniq // width, uniq % width, inverse)
    cache[kind] = (events.kind, result)
    return result


_K = TypeVar("_K", bound=Hashable)


def group_events(events: EventTable, kind: str,
                 key: Callable[[Stack, Any], _K | None]) -> list[tuple[_K, np.ndarray]]:
    """``[(group key, event indices in recorded order)]`` for the events of ``kind``, groups in
    order of first appearance; ``key(stack, payload)`` returning None drops the events."""
    idx, stacks, payloads, inverse = pairs(events, kind)
    if not len(idx):
        return []
    names: dict[_K, int] = {}
    pair_group = np.full(len(stacks), -1, dtype=np.int64)
    for n, (sid, pid) in enumerate(zip(stacks.tolist(), payloads.tolist(), strict=True)):
        k = key(events.stack_of(sid), events.payload_of(pid))
        if k is None:
            continue
        pair_group[n] = names.setdefault(k, len(names))
    keys = list(names)
    if len(names) == 1 and (pair_group == 0).all():
        return [(keys[0], idx)]  # the usual shape of a long run: no sort at all
    gid = pair_group[inverse]
    keep = gid >= 0
    idx, gid = idx[keep], gid[keep]
    if not len(idx):
        return []
    # a stable sort of small integers is numpy's radix sort (linear)
    small = np.uint16 if len(names) <= 0xFFFF else np.int64
    order = np.argsort(gid.astype(small), kind="stable")
    idx, gid = idx[order], gid[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(gid)) + 1))
    ends = np.append(starts[1:], len(idx))
    groups = [(keys[int(gid[a])], idx[a:b]) for a, b in zip(starts, ends, strict=True)]
    groups.sort(key=lambda g: int(g[1][0]))
    return groups


def steps_of(events: EventTable, sel: np.ndarray) -> np.ndarray:
    """The distinct steps of the selected events, sorted."""
    return distinct(events.step[sel])


def event_cause(kind: str, data: Any) -> str:
    """The one-line cause of an event: a compile's cause, a graph break's reason, a read."""
    for attr in ("cause", "reason", "read", "op", "last_reason"):
        value = getattr(data, attr, "") if data is not None else ""
        if value:
            return str(value).strip().splitlines()[0]
    return ""


@dataclass
class EventGroup:
    """One row of the events table: events of one kind (and, for compilations, one phase:
    ``forward``, ``backward``, ``graph``) at one site, for one cause."""

    kind: str
    site: str
    cause: str
    count: int
    seconds: float
    steps: list[int]
    phase: str = ""
    #: the place ``site`` names (the innermost user frame, else the innermost frame); for the
    #: views (a notebook cell's name, a diff's matching), not in the JSON
    frame: Frame | None = field(default=None, metadata={"json": False})


#: kinds listed in the events table, in this order
TABLE_KINDS = ("compile", "graph_break", "eager_fallback", "sync", "fallback")


def event_groups(events: EventTable, max_steps: int = 12) -> list[EventGroup]:
    """Rows ``(kind, site, cause, count, seconds, first steps)`` sorted by kind, then count."""
    rows: list[EventGroup] = []
    for kind in TABLE_KINDS:
        def key(stack: Stack, data: Any,
                kind: str = kind) -> tuple[str, Frame | None, str]:
            site = user_site(stack) or (stack[0] if stack else None)
            phase = data.phase if kind == "compile" and data is not None else ""
            return (phase, site, event_cause(kind, data))

        for (phase, site, cause), sel in group_events(events, kind, key):
            steps = steps_of(events, sel)
            rows.append(EventGroup(kind, str(site) if site else "?", cause, len(sel),
                                   float(events.seconds[sel].sum()),
                                   [int(s) for s in steps[:max_steps]], phase, frame=site))
    order = {k: i for i, k in enumerate(TABLE_KINDS)}
    rows.sort(key=lambda r: (order.get(r.kind, 99), -r.count))
    return rows
