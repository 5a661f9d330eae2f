"""The run model: what a traced run is in memory, the same for every backend (schema 2).

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
"""

from __future__ import annotations

import datetime as _dt
import functools
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

SCHEMA_VERSION = 2

STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
#: the disk filled while the run was written: what was recorded before is kept
STATUS_NO_SPACE = "no_space"
STATUSES = (STATUS_RUNNING, STATUS_OK, STATUS_FAILED, STATUS_INTERRUPTED, STATUS_NO_SPACE)


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class Frame:
    """A place in Python source. ``library`` is True for frames that are not the user's code
    (torch, the XLA package, third-party packages, the standard library, lazyscope itself)."""

    file: str
    line: int
    function: str = ""
    library: bool = False

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} ({self.function})" if self.function else where

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}


#: a Python stack, innermost frame first
Stack = tuple[Frame, ...]


def user_frames(stack: Stack) -> list[Frame]:
    """The user's frames of a stack, innermost first."""
    return [f for f in stack if not f.library]


def user_site(stack: Stack) -> Frame | None:
    """The innermost user frame: the line an event is reported at."""
    for frame in stack:
        if not frame.library:
            return frame
    return None


# --------------------------------------------------------------------------- payloads


def _from_dict(cls: type, data: Any) -> Any:
    """A dataclass from a JSON object, ignoring unknown keys (newer writers add fields)."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} payload is not an object")
    names = _field_names(cls)
    return cls(**{k: v for k, v in data.items() if k in names})


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _checker(hint: Any) -> Callable[[Any], bool]:
    """A function telling whether a decoded JSON value has the shape of a type hint (str, int,
    float, bool, None, lists and dicts of them, unions, dataclasses); built once per hint.
    Run for every payload of a run: the types ``json.loads`` gives are one ``type(v) in``
    test, anything else (a subclass, a union's other member) takes the full check."""
    if hint is Any:
        return lambda v: True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        exact = frozenset(t for a in args for t in _EXACT.get(a, ()))
        options = [_checker(a) for a in args]
        return lambda v: type(v) in exact or any(c(v) for c in options)
    if hint is type(None):
        return lambda v: v is None
    if origin is list or hint is list:
        item = _checker(args[0]) if args else None
        return lambda v: isinstance(v, list) and (item is None or all(item(x) for x in v))
    if origin is dict or hint is dict:
        if not args:
            return lambda v: isinstance(v, dict)
        kc, vc = _checker(args[0]), _checker(args[1])
        return lambda v: isinstance(v, dict) and all(kc(k) and vc(x) for k, x in v.items())
    exact = frozenset(_EXACT.get(hint, ()))
    if hint is float:
        return lambda v: type(v) in exact or (isinstance(v, (int, float))
                                              and not isinstance(v, bool))
    if hint is int:
        return lambda v: type(v) in exact or (isinstance(v, int) and not isinstance(v, bool))
    return lambda v: type(v) in exact or isinstance(v, hint)


#: the types ``json.loads`` gives that match a plain hint outright
_EXACT: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float),
                                       bool: (bool,), type(None): (type(None),)}


@functools.cache
def _checkers(cls: type) -> list[tuple[str, Callable[[Any], bool]]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, _checker(hints[f.name])) for f in fields(cls)]


def validate(obj: Any) -> Any:
    """``obj`` if every field of the dataclass holds a value of its declared type; ValueError
    naming the field otherwise (a corrupt or hostile run file)."""
    for name, check in _checkers(type(obj)):
        if not check(getattr(obj, name)):
            raise ValueError(f"{type(obj).__name__}.{name} has the wrong type")
    return obj


def _frame(value: Any) -> Frame | None:
    if isinstance(value, dict) and "file" in value:
        return Frame(str(value["file"]), int(value.get("line") or 0), str(value.get("function", "")))
    return None


@dataclass
class GraphInput:
    """One input of a compiled graph: dtype and shape, and what it is in the user's terms where
    the backend knows (``name``: a parameter's module path such as ``net.0.weight``, a guarded
    argument such as ``x``; ``origin``: the user line that created it or moved it to the
    device)."""

    dtype: str
    shape: list[int]
    name: str = ""
    origin: Frame | None = None
    #: a Python scalar argument's value (dynamo guards on it): dtype "int" / "float" / "bool"
    value: int | float | bool | str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype, "shape": list(self.shape)}
        if self.name:
            out["name"] = self.name
        if self.origin is not None:
            out["origin"] = self.origin.to_json()
        if self.value is not None:
            out["value"] = self.value
        return out

    @classmethod
    def from_json(cls, data: Any) -> GraphInput:
        if not isinstance(data, dict):
            raise ValueError("a graph input is not an object")
        return validate(cls(str(data.get("dtype", "")),
                            [int(d) for d in data.get("shape") or []],
                            str(data.get("name", "")), _frame(data.get("origin")),
                            data.get("value")))

    def signature(self) -> tuple[str, tuple[int, ...]]:
        return self.dtype, tuple(self.shape)


@dataclass
class Change:
    """One difference between a compiled graph and the closest graph compiled before it at the
    same site: ``what`` is ``dim``, ``rank``, ``dtype``, ``value`` (a guarded Python value),
    ``count`` (number of inputs), ``constant`` (a value baked into the graph), ``ops`` or
    ``guard`` (a backend guard the parser could not split); ``input`` names the input,
    ``index`` the dimension. ``text`` is the backend's own words (dynamo's guard failure)."""

    input: str
    what: str
    index: int | None = None
    before: Any = None
    after: Any = None
    text: str = ""
    #: the user line where the changed input was created or moved to the device, when known
    origin: Frame | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"input": self.input, "what": self.what, "index": self.index,
               "before": self.before, "after": self.after}
        if self.text:
            out["text"] = self.text
        if self.origin is not None:
            out["origin"] = self.origin.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> Change:
        if not isinstance(data, dict):
            raise ValueError("a change is not an object")
        return validate(cls(str(data.get("input", "")), str(data.get("what", "")),
                            data.get("index"), data.get("before"), data.get("after"),
                            str(data.get("text", "")), _frame(data.get("origin"))))


#: who made a graph or a sync: the user's program, or the backend for its own bookkeeping
OWNER_USER = "user"
OWNER_LIBRARY = "library"


@dataclass
class Compile:
    """A graph compiled by the backend.

    ``phase``: ``graph`` (an XLA graph), ``forward`` / ``backward`` (dynamo + AOTAutograd).
    ``cause_kind``: ``barrier`` (a step barrier), ``value_read`` (Python needed a value),
    ``dynamo`` (torch.compile), ``first`` / ``recompile`` (dynamo), ``internal``.
    ``owner``: ``library`` for graphs a library compiles for its own bookkeeping.
    ``inputs``: the graph's inputs where the backend knows them (XLA: from the HLO dump).
    ``changes``: what changed against the closest cached graph, where the *backend* found it
    (dynamo's failing guards); for XLA the analysis diffs ``inputs``.
    ``dynamic``: dimensions the backend switched to dynamic at this compile (dynamo's automatic
    dynamic shapes), e.g. ``"L['x'] dim 1"``.
    ``lines``: for XLA, ``[file, line, digest]`` of each user line that emitted instructions
    (from the HLO's source metadata), so the first line whose instructions differ between two
    graphs is the line to change. ``constants``: special scalars baked into the graph
    (``"f32:0"``).
    """

    phase: str = "graph"
    cause: str = ""
    cause_kind: str = ""
    owner: str = OWNER_USER
    function: str = ""
    inputs: list[GraphInput] | None = None
    num_inputs: int | None = None
    num_outputs: int | None = None
    ops: dict[str, int] | None = None
    digest: str | None = None
    donors: str | None = None
    changes: list[Change] | None = None
    dynamic: list[str] | None = None
    constants: list[str] | None = None
    lines: list[list] | None = None
    hlo_file: str | None = None
    #: forward compile this backward compile belongs to (dynamo: the frame's compile id)
    forward_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == "" or (f.name == "owner" and value == OWNER_USER):
                continue
            if f.name == "inputs":
                value = [i.to_json() for i in value]
            elif f.name == "changes":
                value = [c.to_json() for c in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Any) -> Compile:
        obj = _from_dict(cls, data)
        if not isinstance(obj.inputs, (list, type(None))) or not isinstance(
                obj.changes, (list, type(None))) or not isinstance(obj.lines, (list, type(None))):
            raise ValueError("Compile payload has a field of the wrong type")
        if obj.inputs is not None:
            obj.inputs = [GraphInput.from_json(i) for i in obj.inputs]
        if obj.changes is not None:
            obj.changes = [Change.from_json(c) for c in obj.changes]
        if obj.lines is not None:
            obj.lines = [[str(f), int(n), str(d)] for f, n, d in obj.lines]
        return validate(obj)


@dataclass
class Sync:
    """The host waited for a value from the device (``.item()``, ``if tensor:``, ``.cpu()``,
    a torch op that checks a value on the host ...). The event's ``value`` is the number of
    executions the read forced. ``closure``: ``""`` (in the step), ``"sync"`` (inside a step
    closure, after the barrier, blocking) or ``"async"`` (an async step closure). ``api``: the
    library API that made the read for its own purposes (``xm.rendezvous``), when not the
    user's code."""

    read: str = ""
    shape: list[int] | None = None
    closure: str = ""
    owner: str = OWNER_USER
    message: str = ""
    api: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items()
                if v not in (None, "") and not (k == "owner" and v == OWNER_USER)}

    @classmethod
    def from_json(cls, data: Any) -> Sync:
        return validate(_from_dict(cls, data))


@dataclass
class Fallback:
    """Calls of an op that ran on the CPU, seen at a call site (the event's stack); the event's
    ``value`` is the number of calls, ``seconds`` their wall time. ``via``: the Python call
    during which the op ran (``torch.stft``, ``Tensor.__getitem__``) when it is not the op."""

    op: str = ""
    via: str = ""
    backward: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", False)}

    @classmethod
    def from_json(cls, data: Any) -> Fallback:
        return validate(_from_dict(cls, data))


@dataclass
class FallbackExec:
    """Executions of a CPU-fallback op in one step (exact, from the backend's counters); the
    event's ``value`` is the count."""

    op: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op}

    @classmethod
    def from_json(cls, data: Any) -> FallbackExec:
        return validate(_from_dict(cls, data))


@dataclass
class GraphBreak:
    """torch.compile stopped tracing: ``reason`` in full, dynamo's ``hints``, its type."""

    reason: str = ""
    hints: list[str] = field(default_factory=list)
    kind: str = ""
    function: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", [])}

    @classmethod
    def from_json(cls, data: Any) -> GraphBreak:
        obj = _from_dict(cls, data)
        if not isinstance(obj.hints, list):
            raise ValueError("GraphBreak.hints is not a list")
        return validate(obj)


@dataclass
class EagerFallback:
    """A compiled function hit the backend's recompile limit: from this call on it runs eagerly
    (uncompiled). ``limit`` is the limit, ``last_reason`` the guard failure that hit it."""

    function: str = ""
    limit: int | None = None
    last_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_json(cls, data: Any) -> EagerFallback:
        return validate(_from_dict(cls, data))


#: event kind -> payload type. The order is the on-disk code (index + 1): append only.
PAYLOADS: dict[str, type] = {
    "compile": Compile,
    "sync": Sync,
    "fallback": Fallback,
    "fallback_exec": FallbackExec,
    "graph_break": GraphBreak,
    "eager_fallback": EagerFallback,
}
EVENT_KINDS = tuple(PAYLOADS)
KIND_CODE = {k: i + 1 for i, k in enumerate(EVENT_KINDS)}

Payload = Compile | Sync | Fallback | FallbackExec | GraphBreak | EagerFallback


# --------------------------------------------------------------------------- metadata


#: every numeric step field, in the on-disk column order
STEP_FIELDS = (
    "wall_s", "t_end_s", "compile_count", "compile_s", "execute_count", "execute_s",
    "to_device_count", "to_device_bytes", "to_device_s",
    "from_device_count", "from_device_bytes", "from_device_s", "fallback_count",
)


@dataclass
class Capabilities:
    """What a backend measures: the step fields it fills and the event kinds it can emit, with
    a sentence for each thing it cannot see (shown in reports)."""

    step_fields: list[str] = field(default_factory=lambda: list(STEP_FIELDS))
    events: list[str] = field(default_factory=lambda: list(EVENT_KINDS))
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Capabilities:
        if not isinstance(data, dict):
            return cls()
        return cls([str(f) for f in data.get("step_fields", STEP_FIELDS) if f in STEP_FIELDS],
                   [str(e) for e in data.get("events", EVENT_KINDS)],
                   [str(n) for n in data.get("notes", [])])


@dataclass
class Meta:
    """What ran and how it ended (``meta.json``)."""

    target: str = ""
    target_kind: str = "scenario"  # scenario | script | api
    args: list[str] = field(default_factory=list)
    backend: str = "xla"
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str | None = None
    status: str = STATUS_RUNNING
    error: str | None = None
    steps_requested: int | None = None
    #: a fixed warm-up given by the user (``--warmup-steps``); None: warm-up is found by the
    #: analysis (a graph's first compile at a new site or phase is never a recompile)
    warmup_steps: int | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: this process's rank in a multi-process run, and how many ranks there are
    rank: int | None = None
    world_size: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["capabilities"] = self.capabilities.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Meta:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["capabilities"] = Capabilities.from_json(data.get("capabilities"))
        meta = cls(**kwargs)
        if not isinstance(meta.args, list):
            meta.args = [str(meta.args)]
        meta.args = [str(a) for a in meta.args]
        if not isinstance(meta.info, dict):
            meta.info = {}
        if not isinstance(meta.versions, dict):
            meta.versions = {}
        meta.versions = {str(k): str(v) for k, v in meta.versions.items()}
        # a field of the wrong type is corruption (TypeError -> RunDirError in load_run)
        for name in ("target", "target_kind", "backend", "device", "started_at", "status"):
            if not isinstance(getattr(meta, name), str):
                raise TypeError(f"'{name}' is not a string")
        for name in ("ended_at", "error"):
            if getattr(meta, name) is not None and not isinstance(getattr(meta, name), str):
                raise TypeError(f"'{name}' is not a string")
        for name in ("warmup_steps", "steps_requested", "rank", "world_size"):
            value = getattr(meta, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"'{name}' is not an integer")
        return meta

    @property
    def notes(self) -> list[str]:
        """Lines the backend and the program noted about the run (``info["notes"]``)."""
        notes = self.info.get("notes") or []
        return [str(n) for n in notes] if isinstance(notes, list) else [str(notes)]


# --------------------------------------------------------------------------- steps


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


# --------------------------------------------------------------------------- events


@dataclass
class Event:
    """One event, decoded: its kind, step, seconds, stack, typed payload, key (a graph id for
    compilations) and value (executions forced by a sync, calls of a fallback, a count)."""

    kind: str
    step: int
    seconds: float
    stack: Stack
    data: Any
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
        cols = {"kind": np.zeros(0, np.uint8), "step": np.zeros(0, np.int64),
                "seconds": np.zeros(0), "stack": np.zeros(0, np.uint32),
                "payload": np.zeros(0, np.uint32), "key": np.zeros(0, np.uint32),
                "value": np.zeros(0)}
        none = Interned([])
        return cls(cols, none, none, none)

    def __len__(self) -> int:
        return len(self.kind)

    def mask(self, kind: str) -> np.ndarray:
        """Boolean mask of the events of one kind."""
        return self.kind == KIND_CODE[kind]

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


# --------------------------------------------------------------------------- the run


@dataclass
class Run:
    """A loaded run."""

    path: Path
    meta: Meta
    steps: StepTable
    events: EventTable
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """False when the run never finalised its metadata (killed, or still running)."""
        return self.meta.status != STATUS_RUNNING

    @property
    def status(self) -> str:
        return self.meta.status if self.complete else "incomplete"


def load_run(path: Any) -> Run:
    """Load the run directory at ``path`` (any schema this lazyscope reads); see
    :mod:`lazyscope.store`. Raises RunDirError for anything that is not a readable run."""
    from lazyscope.store import load_run as _load

    return _load(path)
