"""The run model: what a traced run is in memory, the same for every backend (schema 3).

A run is its metadata (:class:`Meta`), its steps (:class:`StepTable`: one row per step barrier,
columnar) and its events (:class:`EventTable`: compilations, host syncs, CPU fallbacks, graph
breaks ..., columnar, with their stacks and payloads interned). ``lazyscope.store`` reads and
writes it; the analyzers read only this module's types, never a backend's raw keys.

Backend-neutral by construction:

* A step field a backend does not measure is absent: its column is ``None`` and
  :class:`Step` shows ``None``, never 0. ``Meta.capabilities`` says which fields and event kinds
  the backend measures.
* Each event kind has a typed payload (:class:`Compile`, :class:`Sync`, :class:`Fallback`,
  :class:`FallbackExec`, :class:`GraphBreak`, :class:`EagerFallback`); each backend maps its
  own sources into them (XLA: HLO dump + PT_XLA_DEBUG; dynamo: guard failures, compile
  metrics, graph-break records).
* A stack is a tuple of :class:`Frame`, innermost first; every frame says whether it is library
  code (torch, the XLA package, site-packages, the standard library, lazyscope itself) or the user's.
  The user's line of an event is its innermost user frame.

Columnar because runs get long: a million steps and as many events load as a few numpy arrays
(see ``benchmarks/scale.py``); a payload or stack is decoded once per distinct value. This module
imports numpy and the standard library only.

Modules: :mod:`~lazyscope.model.frames` (places in source), :mod:`~lazyscope.model.payloads`
(what each event kind carries), :mod:`~lazyscope.model.steps`, :mod:`~lazyscope.model.events`,
:mod:`~lazyscope.model.meta` (``meta.json``), :mod:`~lazyscope.model.run` (a run, a
multi-process run), :mod:`~lazyscope.model.dataframes` (either as pandas DataFrames; pandas
is imported only there, when asked for) and :mod:`~lazyscope.model.codec` (checked JSON
decoding). This package imports numpy and the standard library only, and nothing else of
lazyscope but :mod:`lazyscope.core.errors` (the one line a missing pandas gets).
"""

from __future__ import annotations

from lazyscope.model.codec import validate
from lazyscope.model.events import Event, EventTable, Interned, Lookup, table_from_events
from lazyscope.model.frames import (
    SOURCES_KEY,
    Frame,
    SourceMap,
    Stack,
    location,
    user_frames,
    user_site,
)
from lazyscope.model.meta import (
    SCHEMA_VERSION,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_NO_SPACE,
    STATUS_OK,
    STATUS_RUNNING,
    STATUSES,
    Capabilities,
    Meta,
    now_iso,
)
from lazyscope.model.payloads import (
    EVENT_KINDS,
    KIND_CODE,
    OWNER_LIBRARY,
    OWNER_USER,
    PAYLOADS,
    Change,
    Compile,
    EagerFallback,
    Execute,
    Fallback,
    FallbackExec,
    GraphBreak,
    GraphInput,
    GraphMemory,
    Payload,
    Sync,
    Update,
)
from lazyscope.model.run import PodRun, RankedRun, Run, runs_by_rank
from lazyscope.model.steps import STEP_FIELDS, Step, StepTable

__all__ = [
    "EVENT_KINDS", "KIND_CODE", "OWNER_LIBRARY", "OWNER_USER", "PAYLOADS", "SCHEMA_VERSION",
    "SOURCES_KEY", "SourceMap", "location",
    "STATUSES", "STATUS_FAILED", "STATUS_INTERRUPTED", "STATUS_NO_SPACE", "STATUS_OK",
    "STATUS_RUNNING", "STEP_FIELDS", "Capabilities", "Change", "Compile", "EagerFallback", "Event",
    "EventTable", "Execute", "Fallback", "FallbackExec", "Frame", "GraphBreak", "GraphInput", "GraphMemory", "Update", "Interned",
    "Lookup", "Meta", "Payload", "PodRun", "RankedRun", "Run", "Stack", "Step", "StepTable", "Sync",
    "now_iso", "runs_by_rank", "table_from_events", "user_frames", "user_site", "validate",
]
