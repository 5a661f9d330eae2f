"""The steps of a run: one row per step barrier, as columns (:class:`StepTable`), and one
step decoded (:class:`Step`). A field the backend does not measure is None, never 0."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: every numeric step field, in the on-disk column order (schema 3; schema 2 ended at
#: ``fallback_count``). The last four are the step's measured time intervals, from which
#: :mod:`lazyscope.analyze.anatomy` says where the step's wall time went: ``input_s`` the
#: program's thread waited for its next batch (a ``DataLoader``'s ``__next__``, torch_xla's
#: parallel loader queue), ``barrier_s`` it spent inside the step barrier (CUDA: waiting for the
#: device; XLA: ``torch_xla.sync()``: graph collection, compilation, waiting for the device's
#: previous step, launch), ``sync_s`` inside host reads of device values (``.item()`` ...), and
#: ``own_s`` in lazyscope's own bookkeeping (recording the step, looking at batches).
STEP_FIELDS = (
    "wall_s", "t_end_s", "compile_count", "compile_s", "execute_count", "execute_s",
    "to_device_count", "to_device_bytes", "to_device_s",
    "from_device_count", "from_device_bytes", "from_device_s", "fallback_count",
    "input_s", "barrier_s", "sync_s", "own_s",
)
#: the step fields of a schema-2 run's records (before the time intervals)
STEP_FIELDS_V2 = STEP_FIELDS[:13]
#: the measured intervals of a step's time (see :data:`STEP_FIELDS`)
INTERVAL_FIELDS = ("input_s", "barrier_s", "sync_s", "own_s")



@dataclass
class Step:
    """One step: the work between two step barriers. ``None`` marks a field the backend does
    not measure. ``kind`` is ``step`` or ``tail`` (work after the last barrier)."""

    index: int
    kind: str = "step"
    wall_s: float | None = None
    t_end_s: float | None = None
    compile_count: int | None = None
    compile_s: float | None = None
    execute_count: int | None = None
    execute_s: float | None = None
    to_device_count: int | None = None
    to_device_bytes: int | None = None
    to_device_s: float | None = None
    from_device_count: int | None = None
    from_device_bytes: int | None = None
    from_device_s: float | None = None
    fallback_count: int | None = None
    input_s: float | None = None
    barrier_s: float | None = None
    sync_s: float | None = None
    own_s: float | None = None
    annotations: dict[str, Any] = field(default_factory=dict)


_INT_FIELDS = frozenset(f for f in STEP_FIELDS if f.endswith(("_count", "_bytes")))


class StepTable:
    """The steps of a run as columns: ``table.col("wall_s")`` is a float64 array over the barrier
    steps (the tail excluded), or None when the backend does not measure the field.
    ``table[i]`` is a :class:`Step`; ``table.tail`` the work after the last barrier."""

    def __init__(self, columns: dict[str, np.ndarray], measured: list[str],
                 tail: dict[str, float] | None = None,
                 annotations: dict[int, dict[str, Any]] | None = None):
        self._cols = columns
        self.measured = [f for f in STEP_FIELDS if f in measured]
        n = {len(c) for c in columns.values()}
        if len(n) > 1:
            raise ValueError("step columns differ in length")
        self._n = n.pop() if n else 0
        self._tail = tail
        self.annotations = annotations or {}

    @classmethod
    def empty(cls, measured: list[str]) -> StepTable:
        return cls({f: np.zeros(0) for f in STEP_FIELDS}, measured)

    def __len__(self) -> int:
        return self._n

    def col(self, name: str) -> np.ndarray | None:
        """A measured field over the barrier steps; None when not measured."""
        if name not in self.measured:
            return None
        return self._cols[name]

    def values(self, name: str) -> np.ndarray:
        """A field over the barrier steps, zeros when not measured (for totals and plots only:
        say it is unmeasured where it matters)."""
        col = self.col(name)
        return col if col is not None else np.zeros(self._n)

    def program_s(self) -> np.ndarray:
        """Each step's wall time less lazyscope's own bookkeeping (``own_s``, 0 where not
        measured): the seconds the program itself took, what it takes untraced. Throughput
        and the advice's calibration are in these (a step after a compilation carries
        lazyscope's look at the new graph, tenths of a second on a Trainer's step: not the
        program's, and not the same in two runs that compile differently)."""
        wall = self.values("wall_s")
        own = self.col("own_s")
        if own is None:
            return wall
        out: np.ndarray = np.maximum(wall - np.nan_to_num(own, nan=0.0), 0.0)
        return out

    def total(self, name: str, *, with_tail: bool = True) -> float | None:
        """Sum over the steps (and the tail); None when not measured."""
        col = self.col(name)
        if col is None:
            return None
        total = float(col.sum())
        if with_tail and self._tail is not None:
            total += float(self._tail.get(name, 0.0) or 0.0)
        return total

    def _step(self, values: dict[str, float], index: int, kind: str) -> Step:
        step = Step(index=index, kind=kind, annotations=self.annotations.get(index, {}))
        for name in self.measured:
            value = values.get(name)
            if value is None or value != value:  # NaN: not measured in this record
                continue
            setattr(step, name, int(value) if name in _INT_FIELDS else float(value))
        return step

    def __getitem__(self, i: int) -> Step:
        if not -self._n <= i < self._n:
            raise IndexError(i)
        i %= self._n
        return self._step({k: float(c[i]) for k, c in self._cols.items()}, i, "step")

    def __iter__(self) -> Iterator[Step]:
        for i in range(self._n):
            yield self[i]

    @property
    def tail(self) -> Step | None:
        if self._tail is None:
            return None
        return self._step(self._tail, self._n, "tail")

    def annotation(self, key: str) -> dict[int, Any]:
        """``{step: value}`` for the steps annotated with ``key``."""
        return {i: a[key] for i, a in self.annotations.items() if key in a}
