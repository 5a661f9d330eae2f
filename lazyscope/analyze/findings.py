"""Findings: what to change, at which line, ranked by the time it costs; and notes, one-offs
worth knowing that are not worth a finding.

Every :class:`Finding` names the user's line that must change (``file``, ``line``,
``function``), the user frames that led there (``stack``, innermost first), how often
(``count``, ``steps``), the time it cost (``seconds``), what happened (``detail``) and what to
do (``fix``), in the words of the backend that produced the run (:mod:`lazyscope.analyze.wording`), and
the facts of its kind, typed (``facts``: :class:`RecompileFacts`, :class:`ReuseFacts`,
:class:`SyncFacts`, :class:`FallbackFacts`, :class:`BreakFacts`, :class:`EagerFacts`). The
sentences are written from the facts, never the other way round; a page that needs a fact reads
``facts``.

Kinds: ``recompile`` (graphs keep being made and are not reused: a finding; a one-off after
warm-up: a note), ``reuse`` (a note: several variants, each reused), ``sync``, ``fallback``,
``graph_break``, ``eager_fallback``. A cost inside a library (a read in transformers' mask code,
inside ``xm.mesh_reduce``) is reported at the user's line that called into it, with the library
line where it happens (``SyncFacts.happens_at``) and the API the user called (``api``).
Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from lazyscope.analyze.breaks import BreakSite, EagerSite
from lazyscope.analyze.events import distinct
from lazyscope.analyze.fallbacks import FallbackOp
from lazyscope.analyze.libraries import library_fix
from lazyscope.analyze.makers import (
    ShapeMaker,
    group_by_length,
    multiple_for,
    padded_shapes,
    padded_to_multiple,
)
from lazyscope.analyze.novelty import Outlook
from lazyscope.analyze.recompiles import (
    CHURN,
    FIXED,
    IDENTICAL,
    LATE,
    OPS,
    REUSED,
    Recompile,
    SiteCompiles,
    Varying,
    changes_text,
)
from lazyscope.analyze.syncs import SyncSite
from lazyscope.analyze.wording import plural, say, table
from lazyscope.core import units
from lazyscope.model import OWNER_LIBRARY, Change, Frame

#: steps listed per finding (``step_count`` has the total)
MAX_STEPS_LISTED = 1000
#: a blocking step-closure read in at least this share of the steps is a note
CLOSURE_NOTE_SHARE = 0.5
#: a line that reads values is a finding when it reads in at least this share of the steps ...
SYNC_STEP_SHARE = 0.1
#: ... or costs at least this share of the run's wall time (an accuracy read once per epoch
#: is neither)
SYNC_TIME_SHARE = 0.05
#: changes listed per recompile finding
MAX_CHANGES = 20


# --------------------------------------------------------------------------- the facts


@dataclass
class VaryingInput:
    """What varies between a family's graphs: an input's dimension, rank, dtype or value."""

    input: str
    what: str
    dim: int | None
    values: list[Any]
    growing: bool = False


@dataclass
class RecompileFacts:
    """A family of graphs that costs the program (``verdict`` ``churn``, or ``fixed`` under
    ``--warmup-steps``) or a one-off after warm-up (``late``, a note)."""

    compiled_at: Frame | None
    changes: list[Change]
    varying: list[VaryingInput]
    graphs: int
    dynamic: list[str]
    classes: dict[str, int]
    verdict: str
    #: (fewest, most) executions of the family's graphs; None where not recorded
    runs: list[int] | None = field(default=None, metadata={"omit_none": True})
    #: where the value baked into the graph or guarded is set (a special scalar's assignment,
    #: ``model.step = i`` for a guard on ``self.step``), when that is not the line reported
    value_set_at: Frame | None = field(default=None, metadata={"omit_none": True})
    #: the compiled function's line that reads the guarded value
    value_read_at: Frame | None = field(default=None, metadata={"omit_none": True})
    #: what varies, in a few words each (the verdict's parenthesis)
    reasons: list[str] = field(default_factory=list, metadata={"json": False})


@dataclass
class ReuseFacts:
    """Several variants of one computation, each compiled once and reused: warm-up."""

    compiled_at: Frame | None
    graphs: int
    runs: list[int]
    varying: list[VaryingInput]


@dataclass
class SyncFacts:
    """Reads of device values by the host at one user line, for one cause."""

    reads: dict[str, int]
    executions: int
    closure: str
    #: the library API the user called that made the reads (``xm.mesh_reduce``), if any
    api: str = field(default="", metadata={"omit_empty": True})
    #: the innermost library frame the read happened in, when it happened inside a library
    happens_at: Frame | None = field(default=None, metadata={"omit_none": True})


@dataclass
class FallbackFacts:
    """An aten op without a lowering, run on the CPU."""

    op: str
    via: str
    backward: bool = field(default=False, metadata={"omit_empty": True})
    also_at: list[Frame] = field(default_factory=list, metadata={"omit_empty": True})


@dataclass
class BreakFacts:
    """torch.compile stopped tracing at a line."""

    reason: str
    hints: list[str]
    break_type: str
    function_compiled: str


@dataclass
class EagerFacts:
    """A compiled function past the recompile limit: it runs eagerly from then on."""

    function_compiled: str
    limit: int | None
    last_reason: str


@dataclass
class AliasFacts:
    """A steady graph computes new values of its inputs (parameters, optimizer state) out of
    place: their buffers cannot be donated, so the old and the new value are both held at the
    barrier. Bytes from the backend's analysis of the graph and its HLO."""

    graph: str
    compiled_at: Frame | None
    #: bytes of the inputs the graph computes new values of (donated or not)
    updated_bytes: int
    #: ... of those this line computes out of place (not donated)
    lost_bytes: int
    #: what XLA aliased (donated) in the graph
    aliased_bytes: int
    outputs_bytes: int
    #: the graph's parameter indices of the inputs updated out of place, and their arrays
    inputs: list[int]
    arrays: str


@dataclass
class GrowthFacts:
    """The graphs compiled at one site hold more, graph after graph (inputs + intermediates):
    tensors kept across steps."""

    compiled_at: Frame | None
    graphs: int
    first_bytes: int
    last_bytes: int
    per_graph_bytes: int
    #: the steps the growing graphs were compiled in
    compiled_steps: list[int] = field(default_factory=list)


@dataclass
class DivergenceFacts:
    """A host of a pod that is not like the others: it compiled graphs they did not
    (``diverges`` ``graphs``: where, what changed against their closest graph), it is a
    straggler (``straggler``: its median step against theirs), it stopped early
    (``stopped``: at which step; at the line its program raised at, else ``no_line`` says
    why none can be named), or it is not there at all (``missing``: a host of the ``expected``
    ones with no part in the bucket)."""

    host: int
    diverges: str
    compiled_at: Frame | None = field(default=None, metadata={"omit_none": True})
    changes: list[Change] = field(default_factory=list, metadata={"omit_empty": True})
    graphs: int = field(default=0, metadata={"omit_empty": True})
    ratio: float | None = field(default=None, metadata={"omit_none": True})
    last_step: int | None = field(default=None, metadata={"omit_none": True})
    #: why the finding names no line (a host killed without a trace of where)
    no_line: str | None = field(default=None, metadata={"omit_none": True})
    #: ``missing``: how many hosts the pod was expected to have, and who said so
    #: (``--hosts``, ``TPU_WORKER_HOSTNAMES on host 0``, ``host 2 in the bucket``)
    expected: int | None = field(default=None, metadata={"omit_none": True})
    expected_from: str | None = field(default=None, metadata={"omit_none": True})


@dataclass
class HotLine:
    """A user line the sampler caught the step's thread at, in one part of the step."""

    at: Frame
    #: of the part's samples
    share: float
    samples: int
    #: the library function the line was in when sampled (``torch.optim.adamw.step``)
    callee: str = field(default="", metadata={"omit_empty": True})


@dataclass
class TimeFacts:
    """A part of the steady step that costs the loop: ``input`` or ``host``."""

    part: str
    #: the part's share of the mean steady step, its seconds per step, and that step's
    share: float
    per_step_s: float
    step_s: float
    steps: int
    #: the device's own time per step (XLA: graph execution; CUDA: the barrier's wait)
    device_s: float | None = field(default=None, metadata={"omit_none": True})
    #: the lines the sampler caught the thread at in this part, most sampled first
    hot: list[HotLine] = field(default_factory=list, metadata={"omit_empty": True})
    #: the loader waited on: its settings (``num_workers``, ``pin_memory`` ...) and where it
    #: was made
    loader: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})


@dataclass
class BarrierFacts:
    """A loop with no step barrier: its iterations were traced into one graph, compiled once,
    at a value read after the loop (or the trace's end)."""

    #: the loop's line, and where the graph was cut (the read)
    loop: Frame
    compiled_at: Frame | None
    graph: str
    #: the graph's size: its ops, inputs, and what it holds on the device (bytes; None where
    #: the backend did not analyse it)
    ops: int | None
    graph_inputs: int | None
    memory_bytes: int | None
    compile_seconds: float
    #: graph inputs made at lines inside the loop (one per iteration and tensor moved in)
    loop_inputs: int
    #: step barriers the run reached in all
    run_steps: int


Facts = (RecompileFacts | ReuseFacts | SyncFacts | FallbackFacts | BreakFacts | EagerFacts
         | AliasFacts | GrowthFacts | DivergenceFacts | TimeFacts | BarrierFacts)


@dataclass
class Finding:
    """One thing to change (or, in ``Report.notes``, to know), at one user line."""

    kind: str
    file: str
    line: int
    function: str
    stack: list[Frame]
    count: int
    steps: list[int]
    step_count: int
    seconds: float
    detail: str
    fix: str
    facts: Facts = field(metadata={"flatten": True})
    #: the ranks of a multi-process run it occurs on (None: a single process)
    ranks: list[int] | None = field(default=None, metadata={"omit_none": True})
    #: the hosts of a pod it occurs on (None: not a pod)
    hosts: list[int] | None = field(default=None, metadata={"omit_none": True})

    @property
    def where(self) -> str:
        if self.file:
            return f"{self.file}:{self.line}"
        return "no line" if getattr(self.facts, "no_line", None) else "unknown line"

    @property
    def compiled_at(self) -> Frame | None:
        return getattr(self.facts, "compiled_at", None)

    @property
    def changes(self) -> list[Change]:
        return getattr(self.facts, "changes", [])


def _steps(steps: np.ndarray) -> tuple[list[int], int]:
    return [int(s) for s in steps[:MAX_STEPS_LISTED]], int(len(steps))


def _loc(frame: Frame | None) -> tuple[str, int, str]:
    return (frame.file, frame.line, frame.function) if frame else ("", 0, "")


def _varying(items: list[Varying], limit: int = 64) -> list[VaryingInput]:
    return [VaryingInput(v.input, v.what, v.index, v.values[:limit], v.growing) for v in items]


# --------------------------------------------------------------------------- recompiles


class SourceLookup(Protocol):
    """What only the user's source says (the caller supplies it: reading source is I/O, and this
    module does none; :data:`lazyscope.model.source_files.SOURCES`). Each answer is None when unknown."""

    def value_origin(self, file: str, line: int) -> Frame | None:
        """Where the number a variable used at ``file:line`` holds is set."""

    def assignment_before(self, file: str, line: int, name: str) -> Frame | None:
        """The nearest assignment before ``file:line`` to the attribute or global ``name``."""

    def read_in(self, file: str, def_line: int, name: str) -> Frame | None:
        """The line of the function defined at ``file:def_line`` that reads ``name``."""

    def argument_origins(self, file: str, line: int, callee: str) -> list[Frame]:
        """Where the arguments of the call to ``callee`` at ``file:line`` are made."""

    def transfer_origin(self, file: str, line: int) -> Frame | None:
        """Where a tensor read at ``file:line`` was moved to the device, when elsewhere."""

    def call_line(self, files: list[str], names: list[str], keyword: str = "") -> Frame | None:
        """The one call in ``files`` to a function or class named in ``names``, else the one
        ``keyword=`` argument of a call."""

    def growth_origin(self, file: str, line: int) -> Frame | None:
        """Where a tensor read at ``file:line`` grows (``x = torch.cat((x, ...))``)."""

    def built_at(self, files: list[str], made: Frame | None, names: list[str]) -> Frame | None:
        """The line that built the collate function handed to the loader made at ``made``
        (``collate_fn=`` / ``data_collator=``, followed through variables)."""

    def size_origin(self, file: str, line: int) -> tuple[Frame, Frame] | None:
        """The call at or just above ``file:line`` that makes a size from a Python number, and
        where that number is set."""

    def loop_without_barrier(self, file: str, lines: list[int], read_line: int
                             ) -> Frame | None:
        """The outermost loop holding any of ``lines`` (and not ``read_line``) in which nothing
        ends a step."""

    def data_size_maker(self, file: str, line: int) -> str:
        """What at ``file:line`` makes a size from the data (``nonzero``, ``mask indexing``),
        or ""."""

    def function_of(self, file: str, line: int) -> str:
        """The innermost function holding ``file:line`` ("" when unknown)."""


def _dims_text(varying: list[Varying]) -> str:
    return ", ".join(f"dim {v.index} of {v.input}" for v in varying[:3])


def _recompile_reasons(entry: SiteCompiles) -> list[str]:
    reasons = [v.text() for v in entry.varying
               if v.what in ("dim", "rank", "dtype", "value", "count")]
    if not reasons:
        kinds = {c.what for r in entry.counted for c in r.changes}
        if "count" in kinds:
            reasons.append("the number of graph inputs changes")
        if "ops" in kinds:
            reasons.append("the traced operations differ")
        if any(_special_scalar(c) for r in entry.counted for c in r.changes):
            reasons.append("a special scalar (0 or 1) is baked into some graphs as a constant "
                           "and passed as an input to others")
        elif "constant" in kinds:
            reasons.append("a constant baked into the graph differs")
        if "size" in kinds:
            reasons.append("a size made inside the graph differs")
        if entry.evicted.count:
            reasons.append(f"{units.counted(entry.evicted.count, 'compilation')} of graphs "
                           "compiled before")
        if any(r.cls == IDENTICAL for r in entry.counted):
            reasons.append("identical graphs compiled under new hashes")
    if entry.dynamic:
        reasons.append("torch made " + ", ".join(entry.dynamic) + " dynamic")
    return reasons


def _recompile_fix(backend: str, entry: SiteCompiles, graph_shapes: bool,
                   sources: SourceLookup | None = None, origin: Frame | None = None) -> str:
    counted = entry.counted or entry.recompiles
    whats = {c.what for r in counted for c in r.changes}
    shaped = [v for v in entry.varying if v.what in ("dim", "rank")]
    where = str(origin or entry.origin or entry.site or "this site")
    counts = [v for v in entry.varying if v.what == "count"]
    if counts and not shaped:
        # one more input of one shape at every graph: a list of device tensors stacked or
        # concatenated in the step
        grows = all(c.after > c.before for r in entry.recompiles for c in r.changes
                    if c.what == "count" and isinstance(c.before, int)
                    and isinstance(c.after, int))
        return say(backend, "fix_growing_inputs" if grows else "fix_count_inputs",
                   inputs=counts[0].input, where=where)
    maker = sources.data_size_maker(origin.file, origin.line) \
        if shaped and sources is not None and origin is not None else ""
    if maker:
        # a size the data decides (how many rows a mask keeps): a fixed shape that weighs by
        # the mask, or a few padded sizes
        return say(backend, "fix_data_size", dims=_dims_text(shaped), maker=maker,
                   where=str(origin))
    if shaped:
        # a size that came back (graphs compiled again after the cache dropped them) cycles
        # over a set of values: it does not grow
        if all(v.growing for v in shaped) and not entry.evicted.count:
            return say(backend, "fix_growing", dims=_dims_text(shaped),
                       values=", ".join(_range(v) for v in shaped[:3]))
        if entry.dynamic:  # the backend switched it to dynamic (torch.compile): whatever
            # the sizes were, there is nothing left to pad or drop
            return say(backend, "fix_dynamic_now", dims=", ".join(entry.dynamic))
        if _batch_rows(entry):
            return say(backend, "fix_batch_dim")
        if origin is not None or entry.origin is not None:
            return say(backend, "fix_dims_where", dims=_dims_text(shaped), where=where)
        return say(backend, "fix_dims", dims=_dims_text(shaped))
    if "dtype" in whats:
        names = sorted({c.input for r in counted for c in r.changes if c.what == "dtype"})
        return say(backend, "fix_dtype", inputs=", ".join(names[:3]))
    if "value" in whats:
        names = sorted({c.input for r in counted for c in r.changes if c.what == "value"})
        if any(n.startswith("the value passed across the graph break") for n in names):
            return say(backend, "fix_break_value")
        return say(backend, "fix_value", inputs=", ".join(names[:3]))
    if "count" in whats:
        return say(backend, "fix_count")
    if "size" in whats:
        return say(backend, "fix_internal_size", where=where)
    if "constant" in whats:
        if any(_special_scalar(c) for r in counted for c in r.changes):
            return say(backend, "fix_special_scalar")
        return say(backend, "fix_constant", where=where)
    if "ops" in whats:
        ops = {c.text for r in counted for c in r.changes if c.what == "ops"}
        if ops and ops <= {"convert", "bitcast-convert"}:
            return say(backend, "fix_cast", where=where)
        return say(backend, "fix_ops", where=where)
    if entry.evicted.count and not entry.counted:
        return say(backend, "fix_evicted")
    if any(r.cls == IDENTICAL for r in counted):
        return say(backend, "fix_identical")
    if not graph_shapes:
        return say(backend, "fix_no_shapes")
    return say(backend, "fix_unknown")


def _range(v: Varying) -> str:
    return f"{v.values[0]}..{v.values[-1]}" if v.values else "?"


def _special_scalar(change: Change) -> bool:
    return change.what == "constant" and "special scalar" in change.text


def _fn_frame(entry: SiteCompiles) -> Frame | None:
    """The compiled function's location, ``file:line`` from dynamo's ``name (file:line)``."""
    fn = entry.function
    if "(" in fn and fn.endswith(")"):
        name, _, where = fn[:-1].rpartition(" (")
        file, _, line = where.rpartition(":")
        if line.isdigit():
            return Frame(file, int(line), name)
    return entry.site


def _recompile_facts(entry: SiteCompiles, set_at: Frame | None,
                     read_at: Frame | None) -> RecompileFacts:
    return RecompileFacts(
        compiled_at=entry.site if entry.phase == "graph" else _fn_frame(entry),
        changes=[c for r in entry.counted for c in r.changes][:MAX_CHANGES],
        varying=_varying(entry.varying), graphs=entry.graphs, dynamic=list(entry.dynamic),
        classes=dict(entry.classes), verdict=entry.verdict,
        runs=list(counts) if (counts := entry.run_counts()) is not None else None,
        value_set_at=set_at, value_read_at=read_at, reasons=_recompile_reasons(entry))


def _value_lines(entry: SiteCompiles, origin: Frame | None,
                 sources: SourceLookup | None) -> tuple[Frame | None, Frame | None]:
    """``(where the value is set, where the compiled function reads it)`` for a value the
    graphs depend on: a special scalar baked into an XLA graph (``p.sub_(lr * p.grad)`` ->
    ``lr = ...``), or a Python value torch.compile guards on (``self.step`` in ``forward`` ->
    ``model.step = i`` in the loop)."""
    if sources is None:
        return None, None
    if origin is not None and any(c.what == "constant" for r in entry.counted
                                  for c in r.changes):
        found = sources.value_origin(origin.file, origin.line)
        return (found if found is not None and found.line != origin.line else None), None
    guarded = [v for v in entry.varying if v.what == "value" and
               not v.input.startswith("the value passed across")]
    fn = _fn_frame(entry)
    if not guarded or entry.site is None or fn is None or fn is entry.site:
        return None, None
    name = guarded[0].input
    return (sources.assignment_before(entry.site.file, entry.site.line, name),
            sources.read_in(fn.file, fn.line, name))


def _argument_origin(entry: SiteCompiles, sources: SourceLookup | None) -> Frame | None:
    """A varying input of graphs compiled inside a function (``torch.compile(backend=
    "openxla")``: dynamo lowers the function's graph from library code, so no line of the user's
    is recorded for it) is an argument of that function: the line to change is where the
    caller made it, when the call has exactly one such argument."""
    if sources is None or len(entry.stack) < 2 or not any(
            v.what in ("dim", "rank", "dtype") for v in entry.varying):
        return None
    inside, caller = entry.stack[0], entry.stack[1]
    found = sources.argument_origins(caller.file, caller.line, inside.function)
    return found[0] if len(found) == 1 else None


def recompile_finding(backend: str, entry: SiteCompiles, graph_shapes: bool,
                      sources: SourceLookup | None = None) -> Finding:
    counted = entry.counted
    origin = entry.origin
    caller_made = _argument_origin(entry, sources)
    if caller_made is not None and (origin is None or (
            sources is not None and entry.stack and origin.file == entry.stack[0].file
            and sources.function_of(origin.file, origin.line) == entry.stack[0].function)):
        # the varying input is an argument of the compiled function the graphs were cut in
        # (its line inside the function only uses it): where the caller made it
        origin = caller_made
    if origin is not None and sources is not None and any(
            v.what in ("dim", "rank") for v in entry.varying):
        # the line recorded for a varying input may only use it (under SPMD the sharded input
        # has no line of its own): where it was moved to the device, when that is elsewhere
        origin = sources.transfer_origin(origin.file, origin.line) or origin
    set_at, read_at = _value_lines(entry, origin, sources)
    special = any(_special_scalar(c) for r in counted for c in r.changes)
    # a special scalar or a guarded value is changed where it is set; any other constant
    # (an exponent) where it enters the graph, naming where it is set
    line_frame = (set_at if special or read_at is not None else None) or origin or entry.site
    file, line, function = _loc(line_frame)
    if origin is None:
        stack = list(entry.stack)
    elif entry.stack and entry.stack[0].file == origin.file:
        stack = [origin, *entry.stack[1:]]  # the origin's callers are the barrier's callers
    else:
        stack = [origin]
    if set_at is not None and line_frame is set_at:
        stack = [set_at, *stack]
    maker = _maker_frame(entry, sources)
    grows = _growth_frame(entry, origin, sources) if maker is None else None
    sized = _size_frames(entry, origin, sources) if maker is None and grows is None else None
    if sized is not None:
        # an internal size made from a Python number (an interpolate's scale, a randperm's n):
        # changed where the size is made, from where the number is set
        line_frame, set_at = sized[0], None
        stack = [sized[0], *[f for f in stack if f != sized[0]]]
        file, line, function = _loc(line_frame)
    if grows is not None:
        # a tensor that grows every step is changed where it grows, not where it is read
        line_frame = grows
        stack = [grows, *[f for f in stack if f != grows]]
        file, line, function = _loc(line_frame)
    if maker is not None:
        # the shape is made by the loader's collate function: that line, then the loader's
        # maker and where the batch entered the graph
        line_frame = maker
        made = entry.maker.made_by_user if entry.maker is not None else None
        stack = [maker, *([made] if made is not None and made != maker else []),
                 *[f for f in stack if f != maker and f != made]]
        file, line, function = _loc(line_frame)
    if line_frame is not None and _library_path(line_frame.file):
        # never a library's line (a torch function the recorded metadata pointed into): the
        # first of the user's frames
        line_frame = next((f for f in stack if not f.library and not _library_path(f.file)),
                          entry.site)
        file, line, function = _loc(line_frame)
    facts = _recompile_facts(entry, set_at, read_at)
    n = entry.counted_count
    examples = [f"step {r.step}: {changes_text(r.changes)}" for r in counted if r.changes][:3]
    detail = say(backend, "recompile_detail", where=str(entry.site or entry.function or "?"),
                 graphs=entry.graphs, s=plural(entry.graphs), counted=n, cs=plural(n),
                 fs=plural(entry.compiles - n),
                 reasons=("; " + "; ".join(facts.reasons)) if facts.reasons else "")
    if facts.runs is not None:
        detail += "; " + say(backend, "recompile_runs", runs=_runs_text(facts.runs))
    if entry.outlook is not None and entry.verdict == CHURN and \
            not (entry.evicted.count and not entry.outlook.expected_new):
        # (a family that churns by compiling the same graphs again expects no *new* graph:
        # its outlook would say "~0 more graphs" of a cost that goes on)
        detail += "; " + outlook_text(backend, entry.outlook)
    if entry.maker is not None and maker is not None:
        m = entry.maker
        made_at = m.made_by_user
        detail += "; " + say(backend, "maker_detail", name=m.name,
                             made=f" (the DataLoader made at {made_at})" if made_at else "",
                             tensor=m.key, n=len(m.sizes), batches=m.batches)
    if set_at is not None and read_at is not None:
        detail += "; " + say(backend, "value_guard_detail", name=entry.varying[0].input
                             if entry.varying else "the value", set_at=str(set_at),
                             read_at=str(read_at))
    elif set_at is not None and not special:
        detail += "; " + say(backend, "constant_set_detail", set_at=str(set_at))
    if examples:
        detail += " (" + "; ".join(examples) + ")"
    if entry.backward_seconds:
        detail += (f"; forward compile {units.seconds(entry.seconds)}, backward compile "
                   f"{units.seconds(entry.backward_seconds)}")
    steps, step_count = _steps(entry.counted_steps)
    return Finding(
        kind="recompile", file=file, line=line, function=function, stack=stack, count=n,
        steps=steps, step_count=step_count,
        seconds=entry.counted_seconds + (entry.backward_seconds * n / max(entry.compiles, 1)),
        detail=detail, fix=(say(backend, "fix_size", call=str(sized[0]), set_at=str(sized[1]))
                            if sized is not None else _maker_fix(backend, entry, maker)
                            or _recompile_fix(backend, entry, graph_shapes, sources,
                                              origin)), facts=facts)


def _size_frames(entry: SiteCompiles, origin: Frame | None,
                 sources: SourceLookup | None) -> tuple[Frame, Frame] | None:
    """For graphs whose inputs are the same and an internal size differs: the call that makes
    the size from a Python number, and where the number is set."""
    if sources is None or origin is None or entry.varying:
        return None
    internal = [c for r in entry.counted for c in r.changes
                if c.what in ("constant", "size") and not _special_scalar(c)]
    if not internal:
        return None
    return sources.size_origin(origin.file, origin.line)


def _growth_frame(entry: SiteCompiles, origin: Frame | None,
                  sources: SourceLookup | None) -> Frame | None:
    """The line where a growing input grows (its ``torch.cat``), looked for at the line that
    reads it and then at its callers, when every varying dimension grows."""
    shaped = [v for v in entry.varying if v.what in ("dim", "rank")]
    if sources is None or not shaped or not all(v.growing for v in shaped):
        return None
    for frame in (origin, *entry.stack):
        if frame is not None and not frame.library:
            found = sources.growth_origin(frame.file, frame.line)
            if found is not None:
                return found
    return None


def _maker_frame(entry: SiteCompiles, sources: SourceLookup | None) -> Frame | None:
    """The user's line that makes the family's varying sizes (its loader's collate function,
    or where a library collator is built), or None."""
    m = entry.maker
    if m is None:
        return None
    if _batch_rows(entry):
        # the last batch is smaller: drop_last is an argument of the DataLoader
        return m.made_by_user or m.frame()
    if not m.users_function and m.collate.get("object") and sources is not None:
        files = [f.file for f in (*m.made_at, *entry.stack) if not f.library]
        short = m.name.split(".")[-1]
        found = _built_at(sources, files, m.made_by_user, short) or sources.call_line(
            files, [short], "data_collator" if m.hf_padding else "")
        if found is not None:
            m.resolved = Frame(found.file, found.line, short)
    return m.frame()


def _built_at(sources: SourceLookup, files: list[str], made: Frame | None,
              name: str) -> Frame | None:
    """Where the collator handed to the loader was built, followed through variables (a
    lookup that cannot say: None)."""
    lookup = getattr(sources, "built_at", None)
    return lookup(files, made, [name]) if lookup is not None else None


def _batch_rows(entry: SiteCompiles) -> bool:
    """A smaller last batch: only the batch dimension varies, over two sizes, the second
    smaller and run once an epoch (:func:`lazyscope.analyze.recompiles._partial_batch`)."""
    return entry.last_batch


def _maker_fix(backend: str, entry: SiteCompiles, maker: Frame | None) -> str:
    """The fix where the shape is made, or "" when the family has no maker."""
    m = entry.maker
    if m is None or maker is None or _batch_rows(entry) or entry.verdict != CHURN:
        return ""  # a one-off note keeps its own fix (drop_last, compile every bucket first)
    if padded_to_multiple(m.sizes) and m.hf_padding:
        return ""  # it pads to a multiple already: not advice to give again
    sizes = m.sizes or [v for v in entry.varying for v in v.values if isinstance(v, int)]
    multiple = multiple_for(sizes)
    shapes = padded_shapes(sizes, multiple)
    shown = (", ".join(str(x) for x in shapes) if len(shapes) <= 8 else
             f"{len(shapes)} lengths")
    lo, hi = (min(sizes), max(sizes)) if sizes else (0, 0)
    if m.hf_padding:
        return _hf_maker_fix(backend, m, multiple, shapes, shown, lo, hi)
    if m.users_function:
        return say(backend, "fix_maker_collate", name=m.name, where=str(maker),
                   multiple=multiple, dim=m.dim, shapes=shown, lo=lo, hi=hi)
    return say(backend, "fix_maker_loader", name=m.name, where=str(maker))


def _hf_maker_fix(backend: str, m: ShapeMaker, multiple: int, shapes: list[int], shown: str,
                  lo: int, hi: int) -> str:
    """A Hugging Face collator's padding fix, in the arguments its installed class takes (the
    signature recorded when the run made it): ``pad_to_multiple_of`` added to the user's own
    call, which keeps everything else the collator does; a class that takes no padding option
    (or a run that did not record its signature) is wrapped, never replaced."""
    short = m.name.split(".")[-1]
    top = shapes[-1] if shapes else hi
    takes = m.collate.get("accepts")
    built = m.resolved  # the user's line that builds it, when the source said
    where = f"built at {built.file}:{built.line}" if built is not None else \
        "your program builds"
    if isinstance(takes, list) and "pad_to_multiple_of" in takes:
        one = (say(backend, "fix_maker_hf_one_length", top=top)
               if {"padding", "max_length"} <= set(takes) else "")
        sampler = (group_by_length(m.version) if m.by_trainer else
                   "a length-grouped batch sampler (lazyscope.data.LengthGroupedBatchSampler)")
        return say(backend, "fix_maker_hf", short=short, where=where, multiple=multiple,
                   shapes=shown, lo=lo, hi=hi, one_length=one, sampler=sampler)
    untold = (" and its installed class takes no padding option" if isinstance(takes, list)
              else "")
    return say(backend, "fix_maker_wrap", short=short, where=where, untold=untold,
               buckets=list(shapes), shapes=shown, lo=lo, hi=hi)


def outlook_text(backend: str, o: Outlook) -> str:
    """What a family that keeps compiling is expected to cost over the user's run."""
    horizon = (f"next {units.count(o.horizon_steps)} steps" if o.planned is None else
               f"{units.count(o.horizon_steps)} steps left of your run's {units.count(o.planned)}")
    return say(backend, "recompile_outlook", new_late=o.new_late, graphs=o.graphs,
               once=o.once, expected=units.count(round(o.expected_new)),
               es=plural(round(o.expected_new)), horizon=horizon,
               cost=units.seconds(o.cost_seconds), each=units.seconds(o.seconds_each),
               share=f"{min(o.share, 9.99):.0%}" if o.share < 10 else "over 10x")


def _runs_text(runs: list[int]) -> str:
    fewest, most = runs
    return units.times(fewest, most)


def recompile_note(backend: str, entry: SiteCompiles, graph_shapes: bool,
                   sources: SourceLookup | None = None) -> Finding:
    """A one-off recompilation (after warm-up) with a cause the user can fix."""
    f = recompile_finding(backend, entry, graph_shapes, sources)
    r = entry.counted[0] if entry.counted else None
    if r is not None:
        where = str(entry.site or entry.function or "?")
        changes = changes_text(r.changes) or r.cls
        if entry.counted_count > 1:  # one count per fact: the note's count is its sentence's
            f.detail = say(backend, "recompile_notes_detail", where=where,
                           n=entry.counted_count, step=r.step, changes=changes,
                           steps=", ".join(str(int(s)) for s in entry.counted_steps))
        else:
            f.detail = say(backend, "recompile_note_detail", where=where, step=r.step,
                           changes=changes)
        if isinstance(f.facts, RecompileFacts) and f.facts.value_set_at is not None:
            f.detail += "; " + say(backend, "value_set_detail", where=str(f.facts.value_set_at))
        reused = late_bucket(entry, r)
        multiple = _bucketed_multiple(entry)
        if reused:
            f.fix = say(backend, "late_bucket_fix", step=r.step, graphs=reused,
                        changes=changes_text(r.changes))
        elif multiple:
            # the sizes are padded to a multiple already: a bucket met late, not a size to pad
            f.fix = say(backend, "late_multiple_fix", step=r.step, multiple=multiple,
                        changes=changes_text(r.changes))
        elif entry.counted_count == 1 and not entry.last_batch and not entry.dynamic and \
                _switched(entry, r) and \
                r.changes and all(c.what == "dim" for c in r.changes):
            # one size changed once and kept its new value: a new phase, compiled once
            f.fix = say(backend, "late_switch_fix", step=r.step,
                        changes=changes_text(r.changes), where=f"{f.file}:{f.line}")
    return f


def _switched(entry: SiteCompiles, late: Recompile) -> bool:
    """The graphs compiled before ``late`` never ran again from its step on (where executions
    are recorded): the program switched to the new shape and kept it."""
    earlier = [u for u in entry.uses if u.step < late.step]
    mine = next((u for u in entry.uses if u.graph == late.graph), None)
    kept = mine is not None and mine.last_step is not None and mine.last_step > late.step
    return kept and bool(earlier) and all(u.last_step is not None and u.last_step < late.step
                                          for u in earlier)


def _bucketed_multiple(entry: SiteCompiles) -> int:
    """The multiple (8 or more) the data loader that makes the family's sizes pads every batch
    to (``pad_to_multiple_of``), seen over at least 3 of its sizes; 0 otherwise."""
    if entry.maker is None or len(set(entry.maker.sizes)) < 3:
        return 0
    sizes = entry.maker.sizes + [x for v in entry.varying if v.what == "dim"
                                 for x in v.values if isinstance(x, int)]
    return padded_to_multiple(sizes)


def late_bucket(entry: SiteCompiles, late: Recompile) -> int:
    """How many graphs of ``late``'s family were compiled before it and reused (run at least
    :data:`REUSED_RUNS` times each), when ``late`` only changes dimensions: a bucket first met
    after warm-up in a loop whose bucketing works, not a size to pad. 0 otherwise."""
    if not entry.executions_known or not late.changes or any(
            c.what != "dim" for c in late.changes):
        return 0
    reused = [u for u in entry.uses
              if u.step < late.step and (u.executions or 0) >= REUSED_RUNS]
    return len(reused) if len(reused) >= 2 else 0


#: a graph run this often is reused (bucketing works), for :func:`late_bucket`
REUSED_RUNS = 3


def reuse_note(backend: str, entry: SiteCompiles) -> Finding:
    """A family of variants, each compiled once and reused: no problem, said once (bucketing
    that works)."""
    runs = list(entry.run_counts() or (0, 0))
    what = "; ".join(v.text() for v in entry.varying if v.what in ("dim", "rank", "dtype",
                                                                     "value"))
    where = entry.origin or entry.site
    file, line, function = _loc(where)
    where_text = str(entry.site or entry.function or "?")
    if entry.declared:
        detail = say(backend, "reuse_declared_detail", what=what, graphs=entry.graphs,
                     buckets=len(entry.declared), sizes=", ".join(map(str, entry.declared)),
                     runs=_runs_text(runs), where=where_text)
    else:
        detail = say(backend, "reuse_detail", what=what, graphs=entry.graphs,
                     runs=_runs_text(runs), where=where_text)
    return Finding("reuse", file, line, function, [where] if where else [], entry.graphs, [], 0,
                   0.0, detail, say(backend, "reuse_fix"),
                   ReuseFacts(compiled_at=entry.site, graphs=entry.graphs, runs=runs,
                              varying=_varying(entry.varying)))


# --------------------------------------------------------------------------- the rest


def _reads(site: SyncSite) -> str:
    return ", ".join(f"{r} x{n}" for r, n in site.reads.items())


def _library_path(file: str) -> bool:
    """A file of an installed package (by its path: no I/O)."""
    parts = file.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


def _library_of(frame: Frame) -> str:
    """The installed package a library frame belongs to (``transformers``), from its path."""
    parts = frame.file.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            i = parts.index(marker)
            if i + 1 < len(parts):
                return parts[i + 1].removesuffix(".py")
    return "a library"


#: reads that turn a tensor into text or a Python number: what a library does to a value it was
#: handed to show or log (tqdm's set_postfix, logging, a metrics logger), not to its own tensors
_FORMATTING_READS = ("print(tensor) / repr", "f-string / format(tensor)", "float(tensor)",
                     "int(tensor)")


def _formats(site: SyncSite) -> bool:
    """Every read at the site formats or converts the tensor (see :data:`_FORMATTING_READS`):
    the user's line handed the device tensor to the library that read it."""
    return bool(site.reads) and all(r.startswith(_FORMATTING_READS) for r in site.reads)


def _cost(site: SyncSite) -> float:
    """What a site's reads cost: their price over the steady steps where the step's time is
    cut into parts (:func:`lazyscope.analyze.syncs.read_price`), else every wait."""
    return site.price if site.price is not None else site.seconds


def _cheap(site: SyncSite, wall_seconds: float) -> bool:
    """The site's reads cost less than :data:`SYNC_TIME_SHARE` of the run's wall time (False
    when the wall time is not known)."""
    return bool(wall_seconds) and _cost(site) < SYNC_TIME_SHARE * wall_seconds


def _after_barrier(backend: str, site: SyncSite) -> bool:
    """Most of the reads (three in four) read a value already computed: after the step's
    barrier, they cut no graph. Known where the backend says whether a read's tensor was still
    pending (XLA); for runs recorded before it did, from the executions the reads forced."""
    if site.pending_known:
        return site.pending * 4 <= site.pending_known
    return bool(table(backend)["sync_forced"]) and site.executions * 4 <= site.count


def sync_finding(backend: str, site: SyncSite, wall_seconds: float = 0.0) -> Finding:
    file, line, function = _loc(site.site)
    steps, step_count = _steps(site.steps)
    nsteps = len(site.steps)
    facts = SyncFacts(reads=dict(site.reads), executions=site.executions, closure=site.closure,
                      api=site.library_call if site.owner == OWNER_LIBRARY else "",
                      happens_at=site.happens_at)
    share = (f"{_cost(site) / wall_seconds:.1%} of the run's wall time" if wall_seconds
             else "")
    if site.closure:
        detail = say(backend, "sync_closure_detail", reads=_reads(site), nsteps=nsteps,
                     s=plural(nsteps), seconds=units.seconds(site.seconds))
        fix = say(backend, "sync_closure_fix")
    else:
        forced = (say(backend, "sync_forced", n=units.counted(site.executions, "execution"))
                  if site.executions and table(backend)["sync_forced"] else "")
        after = _after_barrier(backend, site)
        detail = say(backend, "sync_after_detail" if after else "sync_detail",
                     reads=_reads(site), nsteps=nsteps, s=plural(nsteps),
                     seconds=units.seconds(site.seconds), forced="" if after else forced)
        if site.every:
            detail += "; " + say(backend, "sync_every", every=site.every, share=share or "?")
        branch = any(r.startswith("if tensor") for r in site.reads)
        if facts.api and facts.happens_at is None:
            fix = say(backend, "sync_fix_api", api=facts.api)
        elif facts.happens_at is not None:
            library = _library_of(facts.happens_at)
            fix = library_fix(facts.happens_at) or (
                say(backend, "sync_fix_handed", library=library, where=str(site.site),
                    read=_reads(site)) if _formats(site) else
                say(backend, "sync_fix_library", library=library,
                    where=str(facts.happens_at)))
        elif site.every:
            # the line already reads every N steps: never advice to do what it does; what is
            # left is the cost, or a closure that does not wait
            fix = say(backend, "sync_fix_every_cheap" if after or _cheap(site, wall_seconds)
                      else "sync_fix_every", every=site.every)
        else:
            fix = say(backend, "sync_fix_branch" if branch else "sync_fix_value")
    if facts.happens_at is not None:
        detail += "; " + say(backend, "sync_inside_library",
                             library=_library_of(facts.happens_at), where=str(facts.happens_at))
    if site.price is not None:
        detail += "; " + say(backend, "sync_price", price=units.seconds(site.price),
                             over="the steady steps" if site.price_basis == "steady" else
                             "the run's steps (its compilations left out)",
                             wait=units.seconds(site.price_wait),
                             lost=units.seconds(site.price_lost))
    return Finding("sync", file, line, function, list(site.stack), site.count, steps,
                   step_count, _cost(site), detail, fix, facts)


def fallback_finding(backend: str, op: FallbackOp) -> Finding:
    site = op.site
    file, line, function = _loc(site.site if site else None)
    steps, step_count = _steps(op.steps)
    via = f" (called through {site.via})" if site and site.via else ""
    if site and site.backward:
        via += " in the backward pass of the op created at this line"
    others = [s for s in op.sites if s is not site and s.site is not None]
    detail = say(backend, "fallback_detail", op=op.op, count=units.times(op.count),
                 nsteps=f"{step_count} step{plural(step_count)}",
                 via=via)
    if others:
        detail += "; also at " + ", ".join(f"{s.site.file}:{s.site.line}"
                                           for s in others[:3] if s.site)
    replacement = op.replacement()
    fix = (say(backend, "fallback_fix", op=op.op, replacement=replacement) if replacement
           else say(backend, "fallback_fix_generic"))
    if site is not None and site.library:  # inside a library the user's line called
        fix = say(backend, "fallback_fix_library", op=op.op, library=site.library)
    return Finding("fallback", file, line, function, list(site.stack) if site else [],
                   op.count, steps, step_count, op.seconds, detail, fix,
                   FallbackFacts(op=op.op, via=site.via if site else "",
                                 backward=bool(site and site.backward),
                                 also_at=[s.site for s in others[:3] if s.site]))


def break_finding(backend: str, b: BreakSite) -> Finding:
    file, line, function = _loc(b.site)
    steps, step_count = _steps(b.steps)
    hints = (" (hints: " + " ".join(b.hints) + ")") if b.hints else ""
    reason = b.reason.strip()
    if b.kind == "whole function":
        detail = say(backend, "break_whole_detail", function=b.function or "the function",
                     reason=reason, hints=hints)
    else:
        detail = say(backend, "break_detail", count=b.count, s=plural(b.count), reason=reason,
                     hints=hints)
    low = reason.lower()
    if "graph_break()" in low or "explicit" in low or \
            b.kind == "Call to `torch._dynamo.graph_break()`":
        fix = say(backend, "break_fix_explicit")
    elif b.kind == "whole function" and "context manager" in low:
        fix = say(backend, "break_fix_context")
    elif "item" in low or "scalar" in low or "tolist" in low:
        fix = say(backend, "break_fix_item")
    elif "print" in low or "logging" in low:
        fix = say(backend, "break_fix_print")
    elif b.hints:
        fix = say(backend, "break_fix_hints", hints=" ".join(b.hints))
    else:
        fix = say(backend, "break_fix_generic")
    return Finding("graph_break", file, line, function, list(b.stack), b.count, steps,
                   step_count, 0.0, detail, fix,
                   BreakFacts(reason=reason, hints=list(b.hints), break_type=b.kind,
                              function_compiled=b.function))


def eager_finding(backend: str, e: EagerSite) -> Finding:
    file, line, function = _loc(e.site)
    detail = say(backend, "eager_detail", function=e.function or "the function",
                 limit=e.limit if e.limit is not None else "?", step=e.step,
                 reason=e.last_reason or "?")
    return Finding("eager_fallback", file, line, function, list(e.stack), e.count, [e.step], 1,
                   0.0, detail, say(backend, "eager_fix"),
                   EagerFacts(function_compiled=e.function, limit=e.limit,
                              last_reason=e.last_reason))


def _per_step(site: SyncSite, steps: int, wall_seconds: float) -> bool:
    """Reads at a line recur enough to be the user's cost (see the thresholds above)."""
    return site.recurring and (
        not steps or len(site.steps) >= SYNC_STEP_SHARE * steps
        or bool(wall_seconds) and not _cheap(site, wall_seconds))


def make_findings(backend: str, *, sites: list[SiteCompiles], syncs: list[SyncSite],
                  fallbacks: list[FallbackOp], breaks: list[BreakSite], eagers: list[EagerSite],
                  steps: int, graph_shapes: bool = True, wall_seconds: float = 0.0,
                  sources: SourceLookup | None = None
                  ) -> tuple[list[Finding], list[Finding]]:
    """``(findings, notes)``, each ranked by seconds (then count). ``sources`` answers what
    only the user's source says (supplied by the caller: it reads files)."""
    findings: list[Finding] = []
    notes: list[Finding] = []
    ops = [e for e in sites if e.phase == OPS and e.verdict == CHURN]
    if ops:
        findings.append(eager_ops_finding(backend, ops))
    for entry in sites:
        if entry.phase == OPS:
            continue
        n = entry.counted_count
        if entry.verdict == CHURN or (entry.verdict == FIXED and n >= 2):
            findings.append(recompile_finding(backend, entry, graph_shapes, sources))
        elif entry.verdict in (LATE, FIXED) and n >= 1:
            notes.append(recompile_note(backend, entry, graph_shapes, sources))
        elif entry.verdict == REUSED and _reuse_shown(entry) and any(
                v.what in ("dim", "rank", "dtype", "value") for v in entry.varying):
            notes.append(reuse_note(backend, entry))
    findings = _one_finding_per_cause(findings)
    notes = _one_story(findings, _one_finding_per_cause(notes))
    for site in syncs:
        if site.closure == "async":
            continue
        if site.closure:
            if site.owner != OWNER_LIBRARY and steps and \
                    len(site.steps) >= max(2, CLOSURE_NOTE_SHARE * steps):
                notes.append(sync_finding(backend, site))
        elif _per_step(site, steps, wall_seconds):
            # a library API the user calls in the loop reads every step: the user's cost.
            # Reads every N steps, or after the barrier (they cut no graph), are already the
            # advice: a finding only when they still cost the run, else a note with the cost
            if site.every and (_after_barrier(backend, site) or _cheap(site, wall_seconds)):
                # read every N steps, after the barrier (it cuts no graph, and the host waits
                # only for work the device was doing) or costing little: a note with the cost.
                # A read at every step, even after the barrier, makes the host wait for the
                # device at every step: a finding
                notes.append(sync_finding(backend, site, wall_seconds))
            else:
                findings.append(sync_finding(backend, site, wall_seconds))
    findings += [fallback_finding(backend, op) for op in fallbacks if op.count > 0]
    findings += [break_finding(backend, b) for b in breaks]
    findings += [eager_finding(backend, e) for e in eagers]
    return sorted(findings, key=_rank), sorted(notes, key=_rank)


def eager_ops_finding(backend: str, entries: list[SiteCompiles]) -> Finding:
    """One finding for the lines whose ops, run eagerly, were compiled again for new shapes:
    at the costliest line, the others named."""
    entries = sorted(entries, key=lambda e: (-e.counted_seconds, -e.counted_count))
    main = entries[0]
    ops = sorted({u.graph.split(":", 1)[-1] for e in entries for u in e.uses})
    shown = ", ".join(ops[:4]) + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
    also = [str(e.site) for e in entries[1:4] if e.site is not None]
    n = sum(e.counted_count for e in entries)
    file, line, function = _loc(main.site)
    steps, step_count = _steps(distinct(np.concatenate([e.counted_steps for e in entries])))
    detail = say(backend, "recompile_ops_detail", where=str(main.site or "?"),
                 compiles=sum(e.compiles for e in entries), counted=n, ops=shown,
                 also=("; also at " + ", ".join(also)) if also else "")
    facts = RecompileFacts(compiled_at=main.site, changes=[], varying=[],
                           graphs=sum(e.graphs for e in entries), dynamic=[],
                           classes={"op": n}, verdict=CHURN,
                           reasons=["ops run eagerly compiled again for new shapes"])
    return Finding("recompile", file, line, function, list(main.stack), n, steps, step_count,
                   sum(e.counted_seconds for e in entries), detail,
                   say(backend, "fix_eager_ops"), facts)


def _reuse_shown(entry: SiteCompiles) -> bool:
    """A reuse note says the bucketing works: when every graph ran twice at least (a graph run
    once is no evidence of reuse), or the program declared its buckets."""
    runs = entry.run_counts()
    return runs is not None and (bool(entry.declared) or runs[0] >= 2)


def _one_finding_per_cause(findings: list[Finding]) -> list[Finding]:
    """Recompile findings with the same line to change and the same varying inputs are one
    cause cut at several sites (a tensor made at one line and read by two graphs; a step cut in
    two by a read, each part recompiled for the same new length): merged, the other sites kept
    in the detail. One count per fact: a new length that made two graphs in a step is one
    recompilation, so the count is the larger one, the seconds both graphs'."""
    merged: dict[tuple[Any, ...], Finding] = {}
    for f in findings:
        facts = f.facts
        if not isinstance(facts, RecompileFacts) or not facts.varying:
            merged[(id(f),)] = f
            continue
        key = (f.file, f.line, tuple((v.input, v.what, v.dim) for v in facts.varying))
        first = merged.get(key)
        if first is None:
            merged[key] = f
            continue
        first.count = max(first.count, f.count)
        first.seconds += f.seconds
        first.steps = sorted(set(first.steps) | set(f.steps))[:MAX_STEPS_LISTED]
        first.step_count = max(first.step_count, len(first.steps))
        if f.compiled_at is not None and f.compiled_at != first.compiled_at:
            first.detail += f"; also compiled at {f.compiled_at}"
    return list(merged.values())


def _places(f: Finding) -> set[tuple[str, int]]:
    where = {(f.file, f.line)} if f.file else set()
    at = f.compiled_at
    return where | ({(at.file, at.line)} if at is not None else set())


def _one_story(findings: list[Finding], notes: list[Finding]) -> list[Finding]:
    """One site, one story: a note that the graphs of a site are warm-up (``reuse``: "bucketing
    that works"; a one-off ``recompile``) is left out where a recompile finding names the same
    line or the same compile site (a seq2seq collator's encoder graphs reused beside its
    decoder graphs recompiled: the finding is the story, the fix is the same)."""
    places: set[tuple[str, int]] = set()
    for f in findings:
        if f.kind == "recompile":
            places |= _places(f)
    return [n for n in notes if n.kind not in ("reuse", "recompile") or not _places(n) & places]


def _rank(f: Finding) -> tuple[Any, ...]:
    return (-f.seconds, -f.count, f.kind, f.file, f.line)


__all__ = ["AliasFacts", "BarrierFacts", "GrowthFacts", "BreakFacts", "HotLine", "TimeFacts", "EagerFacts", "Facts", "FallbackFacts", "Finding", "RecompileFacts",
           "ReuseFacts", "SourceLookup", "SyncFacts", "VaryingInput", "make_findings"]
