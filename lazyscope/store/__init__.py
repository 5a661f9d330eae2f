"""The run directory on disk: writing it as a run happens, reading it back (schemas 1 to 3).

Schema 3 (written by this lazyscope)::

    meta.json          what ran, where, versions, capabilities, status (replaced atomically)
    steps.bin          one fixed 152-byte record per step: a tag byte (1 step, 2 tail) and 7
                       reserved, then 18 little-endian float64: the index and
                       model.STEP_FIELDS (NaN = not measured); schema 2's records were 120
                       bytes, without the last four fields (the step's time intervals)
    events.bin         one fixed 40-byte record per event: kind code (u8), stack id (u32),
                       step (i64), seconds (f64), payload id (u32), key id (u32), value (f64)
    intern.jsonl       line N holds the value of id N, once: a frame {"f": [file, line,
                       function, library]}, a stack {"s": [frame ids, innermost first]}, a
                       payload {"p": {...}} or a string (a graph id)
    annotations.jsonl  {"step": i, ...} for steps the program annotated (tokens, shapes ...)

Why binary records: a million steps as JSON lines took 14 s to parse on a 2-core VM; as records
they load in 0.1 s (``benchmarks/scale.py``). Stacks and payloads repeat (the same ``.item()``
every step), so each distinct one is written once.

Every file is appended through a shared memory map (:class:`MappedLog`): a record is in the page
cache, safe from a kill, the moment it is copied, with no system call per step. Until the writer
closes a file it is padded with zero bytes, which the reader ignores. A run killed mid-way loads
with every finished record; a half-written last record or line is dropped with a warning.

Schema 1 (``steps.jsonl``, ``events.jsonl``) is read and converted into the same model.

Writing errors: a full disk or an unwritable file raises :class:`~lazyscope.core.errors.OutputError`
(exit 3) naming the file; what was written before stays readable.

Modules: :mod:`~lazyscope.store.records` (the formats), :mod:`~lazyscope.store.writer`,
:mod:`~lazyscope.store.reader`, :mod:`~lazyscope.store.schema1` (the old format's converter)
and :mod:`~lazyscope.store.rundir` (the run directory as a place: replacing, ranks).
"""

from __future__ import annotations

from lazyscope.store.layout import (
    ANNOTATIONS_FILE,
    EVENTS_FILE,
    INTERN_FILE,
    META_FILE,
    RANK_DIR,
    STEPS_FILE,
)
from lazyscope.store.reader import load_run, load_target, read_meta
from lazyscope.store.records import EVENT_DTYPE, EVENT_RECORD, STEP_DTYPE, STEP_RECORD, step_dtype
from lazyscope.store.rundir import (
    check_run_dir,
    is_run_dir,
    prepare_run_dir,
    rank_dir,
    rank_dirs,
    rank_of,
)
from lazyscope.store.writer import (
    MappedLog,
    RunWriter,
    atomic_write_json,
    atomic_write_text,
    is_no_space,
    overwrite_json,
)

__all__ = [
    "ANNOTATIONS_FILE", "EVENTS_FILE", "EVENT_DTYPE", "EVENT_RECORD", "INTERN_FILE", "META_FILE",
    "RANK_DIR", "STEPS_FILE", "STEP_DTYPE", "STEP_RECORD", "step_dtype", "MappedLog", "RunWriter",
    "atomic_write_json", "atomic_write_text", "check_run_dir", "is_no_space", "is_run_dir",
    "load_run", "load_target", "overwrite_json", "prepare_run_dir", "rank_dir", "rank_dirs",
    "rank_of", "read_meta",
]
