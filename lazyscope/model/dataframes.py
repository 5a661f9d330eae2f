"""A run as pandas DataFrames: one row per step, one row per event, named and typed columns.

pandas is optional (``pip install 'lazyscope[data]'``): it is imported inside the functions
here, so the model imports without it; without it they raise
:class:`~lazyscope.core.errors.MissingDependencyError` (exit 4) with one line saying what to install.

:func:`steps_frame` columns, one row per barrier step (and the work after the last barrier, a
row of kind ``tail``, when asked for):

* ``step`` (int64), ``kind`` (category: ``step`` | ``tail``);
* ``start_s`` (Float64): ``t_end_s - wall_s``, seconds since the trace started;
* every field of :data:`~lazyscope.model.STEP_FIELDS` in its on-disk order: ``*_count`` and
  ``*_bytes`` as nullable ``Int64``, seconds as nullable ``Float64``. A field the backend does
  not measure is ``<NA>`` in every row (never 0): ``meta.capabilities`` says what is measured;
* one column per key the program annotated (``lazyscope.annotate_step``), ``<NA>`` in the steps
  it did not annotate (named ``annotation_<key>`` where a key is already a column name).

:func:`events_frame` columns, one row per event, in recorded order:

* ``kind`` (category over :data:`~lazyscope.model.EVENT_KINDS`), ``step`` (int64),
  ``seconds`` (float64: the event's duration where the backend measures it, else 0),
  ``value`` (float64: executions a sync forced, calls of a fallback op, a count);
* ``file``, ``line`` (Int64), ``function``: the user's line of the event (its innermost user
  frame; ``<NA>`` when the stack has none); ``call_stack``: the frames recorded, innermost first,
  each ``file:line (function)``, joined by ``" <- "`` (not named ``stack``: that is a
  DataFrame method, ``df.stack`` would not reach the column);
* from the payload: ``cause`` (string: a compilation's cause, a sync's read, a fallback's op and
  the call it ran in, a graph break's reason, an eager fallback's last reason), ``cause_kind``
  (category: a compilation's ``barrier`` | ``value_read`` | ``dynamo`` ...), ``owner``
  (category: ``user`` | ``library``), ``phase`` (category: ``graph`` | ``forward`` |
  ``backward``), ``op`` (string: the CPU-fallback op), ``graph`` (string: the compiled graph's
  id) and ``digest`` (string: its content digest, equal for equal graphs).

Both are linear in the rows: each distinct stack and payload is decoded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyscope.core.errors import MissingDependencyError
from lazyscope.model.events import EventTable
from lazyscope.model.payloads import (
    EVENT_KINDS,
    Compile,
    EagerFallback,
    Fallback,
    FallbackExec,
    GraphBreak,
    Sync,
)
from lazyscope.model.steps import STEP_FIELDS, StepTable

INSTALL_HINT = "pip install 'lazyscope[data]'"

#: the event columns, in order
EVENT_COLUMNS = ("kind", "step", "seconds", "value", "file", "line", "function", "call_stack",
                 "cause", "cause_kind", "owner", "phase", "op", "graph", "digest")
_PAYLOAD_COLUMNS = ("cause", "cause_kind", "owner", "phase", "op", "digest")
_CATEGORIES = ("cause_kind", "owner", "phase")


def pandas() -> Any:
    """The pandas module, or MissingDependencyError (exit 4) with what to install."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError(
            f"pandas is not installed: {INSTALL_HINT} (pandas, and pyarrow for Parquet)"
        ) from None
    return pd


def _int_field(name: str) -> bool:
    return name.endswith(("_count", "_bytes"))


def steps_frame(steps: StepTable, *, tail: bool = False) -> Any:
    """The steps as a DataFrame (see the module docstring); ``tail``: add the work after the
    last barrier as a last row of kind ``tail`` (when the run recorded any)."""
    pd = pandas()
    n = len(steps)
    tail_step = steps.tail if tail else None
    rows = n + (tail_step is not None)
    kind = ["step"] * n + (["tail"] if tail_step is not None else [])
    data: dict[str, Any] = {
        "step": np.arange(rows, dtype=np.int64),
        "kind": pd.Categorical(kind, categories=["step", "tail"]),
    }
    columns: dict[str, np.ndarray | None] = {}
    for name in STEP_FIELDS:
        col = steps.col(name)
        if col is None:
            columns[name] = None
            continue
        values = np.asarray(col, dtype=np.float64)
        if tail_step is not None:
            last = getattr(tail_step, name)
            values = np.append(values, np.nan if last is None else float(last))
        columns[name] = values
    wall, end = columns.get("wall_s"), columns.get("t_end_s")
    start = end - wall if wall is not None and end is not None else None
    data["start_s"] = _nullable(pd, start, rows, integer=False)
    for name in STEP_FIELDS:
        data[name] = _nullable(pd, columns[name], rows, integer=_int_field(name))
    keys: list[str] = []
    for index in sorted(steps.annotations):
        for key in steps.annotations[index]:
            if key not in keys:
                keys.append(key)
    for key in keys:
        column = key if key not in data else f"annotation_{key}"
        cells = [steps.annotations.get(i, {}).get(key) for i in range(rows)]
        data[column] = pd.Series(cells, dtype="object").convert_dtypes()
    return pd.DataFrame(data)


def _nullable(pd: Any, values: np.ndarray | None, rows: int, *, integer: bool) -> Any:
    """A nullable pandas array: ``<NA>`` where not measured (the whole column, or a NaN)."""
    dtype = "Int64" if integer else "Float64"
    if values is None:
        return pd.array([None] * rows, dtype=dtype)
    mask = np.isnan(values)
    if integer:
        ints = np.where(mask, 0, values).astype(np.int64)
        return pd.arrays.IntegerArray(ints, mask)
    return pd.arrays.FloatingArray(np.where(mask, 0.0, values), mask)


def _payload_fields(data: Any) -> dict[str, Any]:
    """The payload columns of one payload (None where the kind has no such field)."""
    out: dict[str, Any] = dict.fromkeys(_PAYLOAD_COLUMNS)
    if isinstance(data, Compile):
        out.update(cause=data.cause or None, cause_kind=data.cause_kind or None,
                   owner=data.owner or None, phase=data.phase or None,
                   digest=data.digest or None)
    elif isinstance(data, Sync):
        out.update(cause=data.read or None, owner=data.owner or None)
    elif isinstance(data, Fallback):
        out.update(cause=f"{data.op} in {data.via}" if data.via else data.op or None,
                   op=data.op or None)
    elif isinstance(data, FallbackExec):
        out.update(cause=data.op or None, op=data.op or None)
    elif isinstance(data, GraphBreak):
        out.update(cause=data.reason or None)
    elif isinstance(data, EagerFallback):
        out.update(cause=data.last_reason or None)
    return out


def _by_id(ids: np.ndarray, decode: Any, width: int) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """Decode each distinct id once: ``(rows of the distinct ids, inverse index)``."""
    if not len(ids):
        return [], np.zeros(0, np.int64)
    unique, inverse = np.unique(ids, return_inverse=True)
    rows = [decode(int(i)) for i in unique]
    assert all(len(r) == width for r in rows)
    return rows, inverse


def events_frame(events: EventTable) -> Any:
    """The events as a DataFrame (see the module docstring)."""
    pd = pandas()

    def stack_row(sid: int) -> tuple[Any, ...]:
        stack = events.stack_of(sid)
        site = next((f for f in stack if not f.library), None)
        text = " <- ".join(str(f) for f in stack) or None
        if site is None:
            return None, None, None, text
        return site.file, site.line, site.function or None, text

    def payload_row(pid: int) -> tuple[Any, ...]:
        fields = _payload_fields(events.payload_of(pid))
        return tuple(fields[c] for c in _PAYLOAD_COLUMNS)

    stack_rows, stack_inv = _by_id(events.stack, stack_row, 4)
    payload_rows, payload_inv = _by_id(events.payload, payload_row, len(_PAYLOAD_COLUMNS))
    key_rows, key_inv = _by_id(events.key, lambda k: (events.key_of(k) or None,), 1)

    def column(rows: list[tuple[Any, ...]], inverse: np.ndarray, i: int) -> list[Any]:
        values = [r[i] for r in rows]
        return [values[j] for j in inverse]

    codes = np.asarray(events.kind, dtype=np.int64) - 1
    data: dict[str, Any] = {
        "kind": pd.Categorical.from_codes(codes, categories=list(EVENT_KINDS)),
        "step": np.asarray(events.step, dtype=np.int64),
        "seconds": np.asarray(events.seconds, dtype=np.float64),
        "value": np.asarray(events.value, dtype=np.float64),
        "file": pd.array(column(stack_rows, stack_inv, 0), dtype="string"),
        "line": pd.array(column(stack_rows, stack_inv, 1), dtype="Int64"),
        "function": pd.array(column(stack_rows, stack_inv, 2), dtype="string"),
        "call_stack": pd.array(column(stack_rows, stack_inv, 3), dtype="string"),
    }
    for i, name in enumerate(_PAYLOAD_COLUMNS):
        values = column(payload_rows, payload_inv, i)
        if name in _CATEGORIES:
            data[name] = pd.Categorical(values)
        else:
            data[name] = pd.array(values, dtype="string")
    data["graph"] = pd.array(column(key_rows, key_inv, 0), dtype="string")
    return pd.DataFrame(data, columns=list(EVENT_COLUMNS))
