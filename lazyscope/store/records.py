"""The record formats of a schema-2 run directory (see :mod:`lazyscope.store`): file names,
the fixed binary step and event records, and their numpy views."""

from __future__ import annotations

import struct

import numpy as np

from lazyscope.model import STEP_FIELDS, Meta
from lazyscope.model.steps import STEP_FIELDS_V2

STEP_RECORD = struct.Struct("<B7x" + "d" * (1 + len(STEP_FIELDS)))


def _step_dtype(fields: tuple[str, ...]) -> np.dtype:
    return np.dtype([("kind", "u1"), ("_reserved", "V7"), ("index", "<f8")]
                    + [(f, "<f8") for f in fields])


STEP_DTYPE = _step_dtype(STEP_FIELDS)
#: a schema-2 run's step record (120 bytes: no time intervals)
STEP_DTYPE_V2 = _step_dtype(STEP_FIELDS_V2)


def step_dtype(schema_version: int) -> np.dtype:
    """The step record of a run of this schema (2 or later)."""
    return STEP_DTYPE if schema_version >= 3 else STEP_DTYPE_V2
EVENT_RECORD = struct.Struct("<B3xIqdIId")
EVENT_DTYPE = np.dtype({
    "names": ["kind", "stack", "step", "seconds", "payload", "key", "value"],
    "formats": ["u1", "<u4", "<i8", "<f8", "<u4", "<u4", "<f8"],
    "offsets": [0, 4, 8, 16, 24, 28, 32],
    "itemsize": 40,
})
assert STEP_RECORD.size == STEP_DTYPE.itemsize and EVENT_RECORD.size == EVENT_DTYPE.itemsize
#: every record starts with a non-zero byte, so a record cut anywhere is told from padding
KIND_STEP, KIND_TAIL = 1, 2
NAN = float("nan")


def lost_steps(meta: Meta, name: str, warnings: list[str]) -> None:
    """A run whose step file holds no step: lost, when the backend's own counters saw the
    program run and no warning said the file is missing already (any schema)."""
    ran = sum((meta.run_info.runtime_counts or {}).values())
    if ran and not any(w.startswith(f"{name} is missing") for w in warnings):
        warnings.append(f"{name} holds no step, yet the backend's own counters saw "
                        f"the program run ({ran:g} compilations, executions and transfers): "
                        "the file was emptied or cut; its steps are lost")
