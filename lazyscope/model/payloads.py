"""What each event kind carries: one typed payload per kind (:data:`PAYLOADS`), the same for
every backend. Each backend maps its own sources into these (XLA: HLO dump + PT_XLA_DEBUG;
dynamo: guard failures, compile metrics, graph-break records)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lazyscope.model.codec import frame_from_json as _frame
from lazyscope.model.codec import from_dict as _from_dict
from lazyscope.model.codec import validate
from lazyscope.model.frames import Frame


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
    #: the first user line whose instruction takes the input (XLA: from the HLO's source
    #: metadata), e.g. the ``torch.cat`` of a list whose tensors are inputs
    used_at: Frame | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype, "shape": list(self.shape)}
        if self.name:
            out["name"] = self.name
        if self.origin is not None:
            out["origin"] = self.origin.to_json()
        if self.value is not None:
            out["value"] = self.value
        if self.used_at is not None:
            out["used_at"] = self.used_at.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> GraphInput:
        if not isinstance(data, dict):
            raise ValueError("a graph input is not an object")
        return validate(cls(str(data.get("dtype", "")),
                            [int(d) for d in data.get("shape") or []],
                            str(data.get("name", "")), _frame(data.get("origin")),
                            data.get("value"), _frame(data.get("used_at"))))

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


@dataclass
class GraphMemory:
    """What one compiled graph holds on the device, in bytes: the backend's own analysis of the
    compiled program (XLA: torch_xla's Post Compilation Analysis, the executable's
    ``CompiledMemoryStats``, which torch_xla prints in GiB to 6 decimals: each figure here is
    that number times 2**30, so exact to about 1 KiB). ``inputs``: argument buffers;
    ``outputs``: result buffers; ``aliased``: input buffers donated to outputs (counted in both,
    held once); ``intermediates``: temporaries; ``program``: generated code."""

    inputs: int = 0
    outputs: int = 0
    aliased: int = 0
    intermediates: int = 0
    program: int = 0

    @property
    def total(self) -> int:
        """What the graph holds while it runs: its inputs and outputs (a donated buffer
        once), its temporaries and its code."""
        return self.inputs + self.outputs - self.aliased + self.intermediates + self.program

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> GraphMemory:
        return validate(_from_dict(cls, data))


@dataclass
class Update:
    """A graph input that the graph computes a new value of (an output of its dtype and shape
    computed from it: a parameter or optimizer state after the step): ``input`` its parameter
    index, ``nbytes`` its size, ``donated`` whether its buffer is donated to the output
    (updated in place), ``at`` the user line that computes the new value."""

    input: int
    dtype: str
    shape: list[int]
    nbytes: int
    donated: bool
    at: Frame | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"input": self.input, "dtype": self.dtype,
                               "shape": list(self.shape), "nbytes": self.nbytes,
                               "donated": self.donated}
        if self.at is not None:
            out["at"] = self.at.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> Update:
        if not isinstance(data, dict):
            raise ValueError("an update is not an object")
        return validate(cls(int(data.get("input", 0)), str(data.get("dtype", "")),
                            [int(d) for d in data.get("shape") or []],
                            int(data.get("nbytes", 0)), bool(data.get("donated", False)),
                            _frame(data.get("at"))))


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
    lines: list[list[Any]] | None = None
    hlo_file: str | None = None
    #: forward compile this backward compile belongs to (dynamo: the frame's compile id)
    forward_of: str | None = None
    #: what the compiled graph holds on the device (XLA: its Post Compilation Analysis)
    memory: GraphMemory | None = None
    #: the inputs the graph computes new values of, donated or not (XLA: from its HLO)
    updates: list[Update] | None = None
    #: the compile's seconds by phase, where the backend times them apart (JAX: ``trace``,
    #: ``lower``, ``compile``, from its own jax.monitoring events); the event's seconds are
    #: their sum
    phases: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == "" or (f.name == "owner" and value == OWNER_USER):
                continue
            if f.name == "inputs":
                value = [i.to_json() for i in value]
            elif f.name in ("changes", "updates"):
                value = [c.to_json() for c in value]
            elif f.name == "memory":
                value = value.to_json()
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
        if obj.memory is not None:
            obj.memory = GraphMemory.from_json(obj.memory)
        if obj.updates is not None:
            if not isinstance(obj.updates, list):
                raise ValueError("Compile.updates is not a list")
            obj.updates = [Update.from_json(u) for u in obj.updates]
        return validate(obj)


@dataclass
class Sync:
    """The host waited for a value from the device (``.item()``, ``if tensor:``, ``.cpu()``,
    a torch op that checks a value on the host ...). The event's ``value`` is the number of
    executions the read forced. ``closure``: ``""`` (in the step), ``"sync"`` (inside a step
    closure, after the barrier, blocking) or ``"async"`` (an async step closure). ``api``: the
    library API that made the read for its own purposes (``xm.mesh_reduce``), when not the
    user's code; ``called_by``: the library frame that called that API, when library code (a
    Trainer's logging), not the user, called it. ``pending``: True when the value still had to
    be computed (the read cut the step's graph), False when it was device data already (a read
    after the step's barrier), None where the backend does not say."""

    read: str = ""
    shape: list[int] | None = None
    closure: str = ""
    owner: str = OWNER_USER
    message: str = ""
    api: str = ""
    called_by: Frame | None = None
    pending: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "called_by"
               and v not in (None, "") and not (k == "owner" and v == OWNER_USER)}
        if self.called_by is not None:
            out["called_by"] = self.called_by.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> Sync:
        obj = _from_dict(cls, data)
        obj.called_by = _frame(obj.called_by)
        if obj.called_by is not None:
            obj.called_by = Frame(obj.called_by.file, obj.called_by.line,
                                  obj.called_by.function, True)
        return validate(obj)


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


@dataclass
class Execute:
    """Executions of one compiled graph in one step: the event's ``key`` is the graph id (the
    same as its ``compile`` event's), its ``value`` the number of executions. ``cause``: what
    made the backend execute it (``user torch_xla.sync``, a value read, the parallel loader,
    a compiled function's call ...). What tells a graph compiled once and reused (warm-up) from
    graphs made and thrown away (a recompile storm)."""

    cause: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause} if self.cause else {}

    @classmethod
    def from_json(cls, data: Any) -> Execute:
        return validate(_from_dict(cls, data))


#: event kind -> payload type. The order is the on-disk code (index + 1): append only.
PAYLOADS: dict[str, type] = {
    "compile": Compile,
    "sync": Sync,
    "fallback": Fallback,
    "fallback_exec": FallbackExec,
    "graph_break": GraphBreak,
    "eager_fallback": EagerFallback,
    "execute": Execute,
    # a graph first met by this trace that the backend did not compile: it found it in its
    # in-process cache (compiled earlier in the process, outside this trace); a Compile payload
    # (the graph as it was compiled then), ``seconds`` 0
    "cached": Compile,
}
EVENT_KINDS = tuple(PAYLOADS)
KIND_CODE = {k: i + 1 for i, k in enumerate(EVENT_KINDS)}

Payload = Compile | Sync | Fallback | FallbackExec | GraphBreak | EagerFallback | Execute
