"""The events of a run (compilations, host syncs, CPU fallbacks, graph breaks ...) as columns
(:class:`EventTable`) with their stacks and payloads interned, and one event decoded
(:class:`Event`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from lazyscope.model.frames import Frame, Stack, user_site
from lazyscope.model.payloads import EVENT_KINDS, KIND_CODE, Payload


@dataclass
class Event:
    """One event, decoded: its kind, step, seconds, stack, typed payload, key (a graph id for
    compilations) and value (executions forced by a sync, calls of a fallback, a count)."""

    kind: str
    step: int
    seconds: float
    stack: Stack
    data: Payload | None
    key: str = ""
    value: float = 0.0

    @property
    def site(self) -> Frame | None:
        return user_site(self.stack)


class Interned:
    """Values stored once and referenced by id (1-based; 0 is "none"): stacks, payloads,
    strings held in memory (the store reads them from disk lazily with the same interface)."""

    def __init__(self, values: list[Any]):
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i: int) -> Any:
        i = int(i)
        return None if i == 0 else self._values[i - 1]


class Lookup(Protocol):
    """Anything that maps an id to its value (``lookup[i]``; ``lookup[0]`` is None)."""

    def __getitem__(self, i: int) -> Any: ...


class EventTable:
    """The events of a run as columns (numpy arrays of equal length): ``kind`` (codes, see
    :data:`KIND_CODE`), ``step``, ``seconds``, ``stack`` / ``payload`` / ``key`` (ids into
    :meth:`stack_of`, :meth:`payload_of`, :meth:`key_of`) and ``value``.

    Analyses aggregate the columns (one pass, vectorised) and decode a stack or payload once
    per distinct id; :meth:`iter` yields decoded :class:`Event` objects for small selections.
    """

    COLUMNS = ("kind", "step", "seconds", "stack", "payload", "key", "value")

    def __init__(self, columns: dict[str, np.ndarray], stacks: Lookup, payloads: Lookup,
                 keys: Lookup):
        self.kind = columns["kind"]
        self.step = columns["step"]
        self.seconds = columns["seconds"]
        self.stack = columns["stack"]
        self.payload = columns["payload"]
        self.key = columns["key"]
        self.value = columns["value"]
        self._stacks, self._payloads, self._keys = stacks, payloads, keys

    @classmethod
    def empty(cls) -> EventTable:
        cols: dict[str, np.ndarray] = {
                "kind": np.zeros(0, np.uint8), "step": np.zeros(0, np.int64),
                "seconds": np.zeros(0), "stack": np.zeros(0, np.uint32),
                "payload": np.zeros(0, np.uint32), "key": np.zeros(0, np.uint32),
                "value": np.zeros(0)}
        none = Interned([])
        return cls(cols, none, none, none)

    def __len__(self) -> int:
        return len(self.kind)

    def mask(self, kind: str) -> np.ndarray:
        """Boolean mask of the events of one kind."""
        mask: np.ndarray = self.kind == KIND_CODE[kind]
        return mask

    def indices(self, kind: str) -> np.ndarray:
        return np.flatnonzero(self.mask(kind))

    def count(self, kind: str) -> int:
        return int(np.count_nonzero(self.mask(kind)))

    def stack_of(self, sid: int) -> Stack:
        value = self._stacks[sid]
        return value if value is not None else ()

    def payload_of(self, pid: int) -> Any:
        return self._payloads[pid]

    def key_of(self, kid: int) -> str:
        value = self._keys[kid]
        return value if value is not None else ""

    def site_of(self, sid: int) -> Frame | None:
        return user_site(self.stack_of(sid))

    def event(self, i: int) -> Event:
        i = int(i)
        code = int(self.kind[i])
        kind = EVENT_KINDS[code - 1]
        return Event(kind, int(self.step[i]), float(self.seconds[i]),
                     self.stack_of(int(self.stack[i])), self.payload_of(int(self.payload[i])),
                     self.key_of(int(self.key[i])), float(self.value[i]))

    def iter(self, kind: str | None = None) -> Iterator[Event]:
        """Decoded events (of one kind), in recorded order."""
        idx = range(len(self)) if kind is None else self.indices(kind)
        for i in idx:
            yield self.event(int(i))


def table_from_events(events: list[tuple[str, int, float, Stack, Any, str, float]]) -> EventTable:
    """An EventTable built in memory from decoded events (schema 1, tests, merges)."""
    stacks: list[Any] = []
    payloads: list[Any] = []
    keys: list[Any] = []
    ids: dict[Any, int] = {}

    def ref(table: list[Any], tag: str, value: Any, hashable: Any) -> int:
        if value is None or value == () or value == "":
            return 0
        k = (tag, hashable)
        if k not in ids:
            table.append(value)
            ids[k] = len(table)
        return ids[k]

    n = len(events)
    cols: dict[str, np.ndarray] = {
            "kind": np.zeros(n, np.uint8), "step": np.zeros(n, np.int64),
            "seconds": np.zeros(n), "stack": np.zeros(n, np.uint32),
            "payload": np.zeros(n, np.uint32), "key": np.zeros(n, np.uint32),
            "value": np.zeros(n)}
    for i, (kind, step, seconds, stack, payload, key, value) in enumerate(events):
        cols["kind"][i] = KIND_CODE[kind]
        cols["step"][i] = step
        cols["seconds"][i] = seconds
        cols["stack"][i] = ref(stacks, "s", stack, stack)
        cols["payload"][i] = ref(payloads, "p", payload,
                                 json.dumps(payload.to_json(), sort_keys=True, default=str)
                                 if payload is not None else None)
        cols["key"][i] = ref(keys, "k", key, key)
        cols["value"][i] = value
    return EventTable(cols, Interned(stacks), Interned(payloads), Interned(keys))
