"""Which compilations cost the program: graphs that keep being made and are not reused.

A compilation costs the program when graphs keep being made and are not reused: padding to the
longest sequence, a Python int baked into the graph, a float exponent that changes every step
make graphs that run once or a few times, and compile time never stops growing. A bounded set
of graphs, each compiled once and then reused (buckets, train and eval, logging every N steps, a
checkpoint evaluated at the end, optimizer state created at the first step), is warm-up,
whatever their shapes.

**Families.** Graphs are grouped by *site* (the user line where an XLA graph was cut: the step
barrier or a value read; for torch.compile the compiled function and the line that calls it)
and, within a site, by *family*: the same computation whatever its sizes, dtypes and constants
(the same tensor inputs by rank and the same kinds of ops, casts aside; for torch.compile, every
graph of one function). A call site is not a role (one ``trainer.train()`` line runs every
graph of a Hugging Face program): the train step, the eval step, the logging step and the first
optimizer step are different families, and a graph is never diffed with another family's.

**Novelty.** Each graph's executions come from the backend's ``execute`` events (XLA: torch_xla's
execution analysis of every execution, by graph hash; torch.compile: the calls of each compiled
variant). A family *churns* (a recompile finding) when it keeps making new graphs: judged by
:mod:`lazyscope.analyze.novelty` from how many graphs ran once and twice, how often the run's
second half still met new ones, and the sizes the varying dimension took, as the graphs still
expected over the user's run (``meta.json`` info ``planned_steps`` when known, else
:data:`~lazyscope.analyze.novelty.DEFAULT_HORIZON` more steps) priced at the compile seconds
measured here against the run's steady step time. However often some of its graphs were
reused, a family that keeps meeting new ones costs; a bounded set met early (buckets, train and
eval, a burst of graphs in the first step) does not, however many compilations its warm-up
took. The rule is proved over simulated runs in ``tests/unit/test_novelty.py``.

A family whose recompilations only move dimensions between the bucket lengths the program
declared (``lazyscope.data.PadToBuckets`` writes them to ``meta.json`` info
:attr:`~lazyscope.model.info.RunInfo.declared_buckets`), with no more graphs than buckets, is bucketing before any of this:
the program bounded its graphs, and a short run that meets most buckets once each would read as
churn from the executions alone.

Ops run eagerly (phase ``op``: torchax without ``jax.jit``) are compiled one by one, each op's
program cached by shape: their family is every op compiled at one line, and an op compiled
again there (its graph id again) in a later step than its first compile met a new shape (again
in the same step: another shape in the same pass, a second layer); two or more such repeats
churn. Without steps nothing is counted.

A family that does not churn is warm-up, except its *late* variants: graphs of a family that
already had a graph, first compiled after the run's warm-up ended (from the first stretch of
:data:`QUIET_STEPS` steps that compiled nothing on), that are either a *switch* (the family's
earlier graphs never run again: a learning rate that reaches the special scalar 0.0, a cast
added mid-run) or *rare* (run at most :data:`RARE_SHARE` as often as the family's most used
graph, or twice: a last partial batch): a one-off recompilation worth knowing, a note (from
:data:`MANY_LATE` late recompilations of one family on, a finding: not a one-off). A late
variant run as often as the others, interleaved with them, is one more bucket: warm-up. The
recompilation after which torch.compile made a dimension dynamic is a note too (marked dynamic
up front, it is none). A family of several variants that are all reused is said in a ``reuse`` note ("dim 1
takes 3 sizes, each compiled once and reused 6-9 times: bucketing works"). A graph compiled
again under an id it had (the compile cache dropped it) is pure waste: two or more make a
finding, one a note. Where executions per graph are not recorded (runs of older lazyscopes,
workers other than local rank 0, eager mode, torch.compile), a family churns when it compiles two
or more *variants* of its first graph (same structure, other shapes, dtypes or constants), as
before. With a fixed warm-up (``--warmup-steps N``) every compilation from step N on counts.

**The explanation.** Within a family each graph is diffed against the closest graph compiled
before it (by content, through an index: linear in the compilations): what varies (an input's
dimension, dtype, a constant) and the user line it comes from. That says *what* to change; reuse
says *whether*. Pure functions: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.events import distinct, id_counts, id_first, pairs
from lazyscope.analyze.makers import ShapeMaker, shape_maker
from lazyscope.analyze.novelty import DEFAULT_HORIZON, MIN_NEW, Outlook, outlook
from lazyscope.model import (
    KIND_CODE,
    OWNER_LIBRARY,
    Change,
    Compile,
    EventTable,
    Frame,
    GraphInput,
    Run,
    Stack,
    user_frames,
    user_site,
)

#: where executions per graph are not recorded, a family churns from this many variants of its
#: first graph (and from this many graphs compiled again after the cache dropped them)
CHURN_ONE_SHOTS = 2
#: compile-free steps in a row that end the run's warm-up (later variants are "late")
QUIET_STEPS = 2
#: a late variant run at most this share of the family's most used graph's runs is "rare"
RARE_SHARE = 0.25
#: late recompilations of one family from this many on are not one-offs: a recompile finding
#: (six size changes after warm-up are a schedule to fix, not a note)
MANY_LATE = 3

#: how a graph relates to the closest earlier graph of its family
FIRST, STRUCTURE, VARIANT, IDENTICAL = "first", "structure", "variant", "identical"
#: a graph id compiled again at its site (the compile cache dropped it)
EVICTED = "evicted"

#: the phase of compilations of single ops run eagerly (torchax without jit): the same op
#: compiled again at a line (its graph id again) met a new shape
OPS = "op"

#: a family's verdict
CHURN = "churn"  # a finding: graphs keep being made and are not reused
LATE = "late"  # a note: a variant compiled after warm-up
REUSED = "reused"  # several variants, each reused (a reuse note)
CHEAP = "cheap"  # keeps making graphs, each too cheap to cost the run (nothing to say)
SINGLE = "single"  # one graph: nothing to say
FIXED = "fixed"  # --warmup-steps: compilations from that step on count


@dataclass
class Recompile:
    """A graph of a family after its first, explained against the closest earlier graph of the
    family. ``counted``: this compilation is part of the family's cost (see the verdict)."""

    step: int
    seconds: float
    graph: str
    closest: str
    cls: str
    changes: list[Change]
    counted: bool = False
    executions: int | None = None


@dataclass
class Varying:
    """An input dimension (or a value) whose size differs between the graphs of one family."""

    input: str
    what: str
    index: int | None
    values: list[Any]
    #: every change made it larger (the size follows the step: a running torch.cat, a length
    #: computed from the step number ...), as opposed to values that come and go
    growing: bool = False
    origin: Frame | None = None

    def text(self) -> str:
        vals = self.values
        shown = ("{" + ", ".join(str(v) for v in vals) + "}" if len(vals) <= 4 else
                 f"{len(vals)} values in {vals[0]}..{vals[-1]}")
        if self.what == "dim":
            return f"{self.input} varies in dim {self.index} over {shown}"
        if self.what == "rank":
            return f"{self.input} changes rank over {shown}"
        if self.what == "dtype":
            return f"{self.input} changes dtype over {shown}"
        if self.what == "count":
            how = "grows" if self.growing else "varies"
            return f"the number of {self.input.removeprefix('the ')}s {how} over {shown}"
        return f"{self.input} takes {shown}"


@dataclass
class GraphUse:
    """One graph of a family: where and when it was first compiled, and how often it ran."""

    graph: str
    step: int
    seconds: float
    #: executions over the run; None where the backend did not record them
    executions: int | None
    #: the last step it ran in (None: not recorded)
    last_step: int | None = None


@dataclass
class Evicted:
    """Compilations of graph ids already compiled at the site (cache evictions)."""

    count: int = 0
    seconds: float = 0.0
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    total: int = 0


@dataclass
class SiteCompiles:
    """One family of graphs at one site, judged (``verdict``) and explained."""

    site: Frame | None  # where the graphs were cut / the compiled function's call
    stack: Stack
    phase: str
    function: str
    compiles: int
    graphs: int
    first_step: int
    seconds: float
    backward_seconds: float = 0.0
    recompiles: list[Recompile] = field(default_factory=list)
    varying: list[Varying] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)
    classes: dict[str, int] = field(default_factory=dict)
    evicted: Evicted = field(default_factory=Evicted)
    uses: list[GraphUse] = field(default_factory=list)
    verdict: str = SINGLE
    #: the bucket lengths the program declared (lazyscope.data.PadToBuckets) that this family's
    #: varying dimensions stay within; empty when it has none or leaves them
    declared: list[int] = field(default_factory=list)
    #: the graphs still expected over the user's run and their cost (executions known)
    outlook: Outlook | None = None
    #: the DataLoader whose batches made the varying sizes (lazyscope.analyze.makers)
    maker: ShapeMaker | None = None
    #: judged as every graph of its site together (:func:`_by_site`): graphs of several
    #: computations (more inputs each time) that, together, keep being new
    site_wide: bool = False
    #: its two graphs are a full batch and a smaller last batch of an epoch (dim 0 only)
    last_batch: bool = False

    @property
    def executions_known(self) -> bool:
        return bool(self.uses) and all(u.executions is not None for u in self.uses)

    @property
    def counted(self) -> list[Recompile]:
        """Counted recompilations of distinct graphs (the evicted repeats are in ``evicted``)."""
        return [r for r in self.recompiles if r.counted]

    @property
    def counted_count(self) -> int:
        return len(self.counted) + self.evicted.count

    @property
    def counted_seconds(self) -> float:
        return sum(r.seconds for r in self.counted) + self.evicted.seconds

    @property
    def counted_steps(self) -> np.ndarray:
        steps = np.array([r.step for r in self.counted], dtype=np.int64)
        return distinct(np.concatenate((steps, self.evicted.steps)))

    def run_counts(self) -> tuple[int, int] | None:
        """(fewest, most) executions of the family's graphs, when recorded."""
        if not self.executions_known:
            return None
        runs = [u.executions or 0 for u in self.uses]
        return min(runs), max(runs)

    @property
    def origin(self) -> Frame | None:
        """The user line to change: where the varying input was created or moved to the
        device, or the line of the first op that differs; None when not known."""
        for v in self.varying:
            if v.origin is not None:
                return v.origin
        for r in self.counted or self.recompiles:
            for c in r.changes:
                if c.origin is not None:
                    return c.origin
        return None


# --------------------------------------------------------------------------- signatures


_MASK = (1 << 64) - 1


def _h(item: tuple[Any, ...]) -> int:
    return hash(item) & _MASK


#: HLO ops a dtype change adds or removes
_CASTS = frozenset({"convert", "bitcast-convert"})


class _Graph:
    """A compiled graph's content, indexed: its inputs as a multiset, its hashes. Built once per
    distinct payload."""

    __slots__ = ("multiset", "hash", "structure", "family", "ops", "digest", "names",
                 "origins", "lines", "num_inputs", "constants", "named", "used")

    def __init__(self, data: Compile):
        #: every input has a name (dynamo's arguments): compared by name, not as a multiset
        self.named: dict[str, GraphInput] | None = (
            {i.name: i for i in data.inputs} if data.inputs and all(i.name for i in data.inputs)
            else None)
        self.ops = data.ops
        self.digest = data.digest
        self.lines: dict[tuple[str, int], str] = {(f, n): d for f, n, d in data.lines or []}
        self.constants = Counter(data.constants or [])
        self.num_inputs = data.num_inputs
        self.names: dict[tuple[Any, ...], str] = {}
        self.origins: dict[tuple[Any, ...], Frame] = {}
        #: per input signature, the user lines whose instructions take inputs of it
        self.used: dict[tuple[Any, ...], Counter[Frame]] = {}
        # structure: how many inputs, of which ranks, and which kinds of ops (a cast adds
        # converts, which are not structure: a dtype change is a variant)
        op_kinds = tuple(sorted(k for k in (data.ops or {}) if k not in _CASTS))
        if data.inputs is not None:
            sigs = [i.signature() for i in data.inputs]
            self.multiset: Counter[Any] | None = Counter(sigs)
            self.hash = sum(_h(s) for s in self.multiset.elements()) & _MASK
            self.structure: tuple[Any, ...] = (len(sigs), tuple(sorted(Counter(
                len(shape) for _, shape in sigs).items())), op_kinds)
            # the family: the same computation whatever its sizes, dtypes and constants: tensor
            # inputs by rank (a scalar input that becomes a baked-in constant, or back, is a
            # variant), the kinds of ops without casts
            tensors = [len(shape) for _, shape in sigs if shape]
            self.family: tuple[Any, ...] = ("inputs", len(tensors), tuple(sorted(Counter(
                tensors).items())), op_kinds)
            for i in data.inputs:
                if i.name:
                    self.names.setdefault(i.signature(), i.name)
                if i.origin is not None:
                    self.origins.setdefault(i.signature(), i.origin)
                if i.used_at is not None:
                    self.used.setdefault(i.signature(), Counter())[i.used_at] += 1
        else:
            self.multiset = None
            self.hash = 0
            self.structure = (data.num_inputs, (), op_kinds)
            self.family = ("ops", op_kinds) if data.ops else ("unknown",)
        if self.named is not None:  # a compiled function's arguments: one family per function
            self.family = ("function",)


class _SiteIndex:
    """The closest-graph search of one site: O(inputs) per graph, not O(graphs). Entries are
    ``(graph id, graph)``."""

    def __init__(self) -> None:
        self.latest: tuple[str, _Graph] | None = None
        self.by_hash: dict[int, tuple[str, _Graph]] = {}
        self.by_minus_one: dict[int, tuple[str, _Graph]] = {}
        self.by_structure: dict[tuple[Any, ...], tuple[str, _Graph]] = {}

    def closest(self, g: _Graph) -> tuple[str, _Graph] | None:
        if self.latest is None:
            return None
        if g.multiset is not None:
            same = self.by_hash.get(g.hash)
            if same is not None:
                return same
            for sig in g.multiset:
                hit = self.by_minus_one.get((g.hash - _h(sig)) & _MASK)
                if hit is not None:
                    return hit
        return self.by_structure.get(g.structure) or self.latest

    def add(self, graph: str, g: _Graph) -> None:
        entry = (graph, g)
        self.latest = entry
        if g.multiset is not None:
            self.by_hash[g.hash] = entry
            for sig in g.multiset:
                self.by_minus_one[(g.hash - _h(sig)) & _MASK] = entry
        self.by_structure[g.structure] = entry


def _diff_named(new: dict[str, GraphInput], old: dict[str, GraphInput]) -> list[Change]:
    """Every difference between two sets of named arguments (dynamo: each compiled frame's
    tensors and Python scalars), not only the first failing guard."""
    out: list[Change] = []
    for name in sorted(set(new) | set(old)):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            out.append(Change(name, "count", None, "absent" if a is None else "present",
                              "absent" if b is None else "present"))
            continue
        if a.value is not None or b.value is not None:
            if a.value != b.value:
                out.append(Change(name, "value", None, a.value, b.value))
            continue
        if a.dtype != b.dtype:
            out.append(Change(name, "dtype", None, a.dtype, b.dtype))
        if len(a.shape) != len(b.shape):
            out.append(Change(name, "rank", None, list(a.shape), list(b.shape)))
        else:
            out += [Change(name, "dim", d, x, y)
                    for d, (x, y) in enumerate(zip(a.shape, b.shape, strict=True)) if x != y]
    return out


def diff_graphs(new: _Graph, old: _Graph) -> tuple[str, list[Change]]:
    """``(class, changes)`` of ``new`` against ``old``, by content."""
    if new.named is not None and old.named is not None:
        changes = _diff_named(new.named, old.named)
        if changes:
            cls = STRUCTURE if any(c.what == "count" for c in changes) else VARIANT
            return cls, changes
    if new.multiset is None or old.multiset is None:
        if new.num_inputs is not None and old.num_inputs is not None \
                and new.num_inputs != old.num_inputs:
            return STRUCTURE, [Change("inputs", "count", None, old.num_inputs, new.num_inputs)]
        if new.digest and new.digest == old.digest:
            return IDENTICAL, []
        return VARIANT, []
    if new.multiset == old.multiset:
        if new.digest and new.digest == old.digest:
            return IDENTICAL, []
        return _op_changes(new, old)
    added = new.multiset - old.multiset
    removed = old.multiset - new.multiset
    changes = []
    cls = VARIANT if new.structure == old.structure else STRUCTURE
    # pair removed and added inputs: same dtype and rank first (a dimension changed), then
    # same shape (a dtype changed), then same rank (dtype and shape)
    rem = list(removed.elements())
    add = list(added.elements())
    for key in (lambda s: (s[0], len(s[1])), lambda s: s[1], lambda s: len(s[1])):
        pool: dict[Any, Any] = {}
        for s in rem:
            pool.setdefault(key(s), []).append(s)
        left_add = []
        for s in add:
            match = pool.get(key(s))
            if match:
                before = match.pop(0)
                rem.remove(before)
                changes.extend(_pair_changes(before, s, old, new))
            else:
                left_add.append(s)
        add = left_add
    if len(rem) != len(add) or rem or add:
        special = new.constants - old.constants
        if special and rem and not add and all(len(sh) == 0 for _, sh in rem):
            # a scalar input became a constant: a special scalar (0 or 1) baked into the graph
            return VARIANT, [Change("graph", "constant", None, None, None,
                                    text=f"special scalar: a scalar input became the constant "
                                         f"{', '.join(sorted(special))}",
                                    origin=_first_changed_line(new, old, last=True))]
        lost = old.constants - new.constants
        if lost and add and not rem and all(len(sh) == 0 for _, sh in add):
            # the other way: what was a special scalar constant comes in as a scalar input.
            # Structure, as optimizer state created at the first step is: an accumulator set to
            # torch.zeros(()) before a phase is a constant in the phase's first graph and the
            # previous step's result in the next (a learning rate that leaves 0.0 reads the
            # same; it is counted when it becomes a constant again)
            return STRUCTURE, [Change("graph", "constant", None, None, None,
                                    text=f"special scalar: the constant "
                                         f"{', '.join(sorted(lost))} became a scalar input",
                                    origin=_first_changed_line(new, old, last=True))]
        sigs = set(add) | set(rem)
        if len(sigs) == 1 and not (add and rem):
            # one more (or fewer) input of one dtype and shape, the rest unchanged: a list of
            # device tensors stacked or concatenated before the barrier (the line where the
            # graph's instructions differ is the stack or cat that takes them)
            sig = next(iter(sigs))
            # the line that takes them (the stack or cat), else the first that differs
            takes = ((new.used.get(sig) or Counter()) - (old.used.get(sig) or Counter())
                     ).most_common(1)  # the lines that take one more of them
            changes.append(Change(_sig_name(sig), "count", None, old.multiset[sig],
                                  new.multiset[sig], origin=takes[0][0] if takes
                                  else _first_changed_line(new, old)))
        else:
            changes.append(Change("inputs", "count", None, sum(old.multiset.values()),
                                  sum(new.multiset.values())))
        cls = STRUCTURE
    if not changes:
        return _op_changes(new, old)
    return cls, changes


def _sig_name(sig: tuple[str, tuple[int, ...]]) -> str:
    """``the f32[8,32] input`` for a (dtype, shape) signature."""
    return f"the {sig[0]}[{','.join(str(d) for d in sig[1])}] input"


def _pair_changes(before: tuple[Any, ...], after: tuple[Any, ...], old: _Graph, new: _Graph) -> list[Change]:
    (d0, s0), (d1, s1) = before, after
    name = old.names.get(before) or new.names.get(after)
    if not name:  # named by what stays the same, so that it keeps its name across graphs
        if len(s0) == len(s1):
            dims = ",".join(str(a) if a == b else "?" for a, b in zip(s0, s1, strict=True))
            name = f"the {d0 if d0 == d1 else '?'}[{dims}] input"
        else:
            name = f"the {d0} input of rank {len(s0)}"
    # where the tensor was made: known in either graph (a graph traced with source lines off
    # has none), else the first user line whose instructions differ (an input the backend makes
    # itself, such as a scalar, has no line of its own)
    origin = new.origins.get(after) or old.origins.get(before) or _first_changed_line(new, old)
    out = []
    if d0 != d1:
        out.append(Change(name, "dtype", None, d0, d1, origin=origin))
    if len(s0) != len(s1):
        out.append(Change(name, "rank", None, list(s0), list(s1), origin=origin))
    else:
        out += [Change(name, "dim", i, a, b, origin=origin)
                for i, (a, b) in enumerate(zip(s0, s1, strict=True)) if a != b]
    return out


def _op_changes(new: _Graph, old: _Graph) -> tuple[str, list[Change]]:
    """Same inputs, different graph: which ops changed, at the first user line whose
    instructions differ."""
    ops_new, ops_old = new.ops or {}, old.ops or {}
    origin = _first_changed_line(new, old)
    special = new.constants - old.constants
    if special:
        return VARIANT, [Change("graph", "constant", None, None, None,
                                text=f"special scalar: the constant {', '.join(sorted(special))} "
                                     "appeared in the graph", origin=origin)]
    changes = []
    for op in sorted(set(ops_new) | set(ops_old)):
        delta = ops_new.get(op, 0) - ops_old.get(op, 0)
        if delta:
            changes.append(Change("graph", "ops", None, ops_old.get(op, 0), ops_new.get(op, 0),
                                  text=op, origin=origin))
    if changes:
        cls = STRUCTURE if set(ops_new) != set(ops_old) else VARIANT
        return cls, changes
    # same inputs and op counts: a constant (a Python number baked into the graph) or a
    # shape inside the graph changed; the line's digests say which (a size changes the
    # instructions' shapes, a constant only its value)
    sized = _sized(new, old, origin)
    if sized:
        return VARIANT, [Change("graph", "size", None, None, None,
                                text="same inputs and op counts; an internal size differs "
                                     "(a length made from a Python number)", origin=origin)]
    return VARIANT, [Change("graph", "constant", None, None, None,
                            text=("same inputs and op counts; a constant differs (a Python "
                                  "number baked into the graph)" if sized is False else
                                  "same inputs and op counts; a constant or an internal shape "
                                  "differs"), origin=origin)]


def _sized(new: _Graph, old: _Graph, at: Frame | None) -> bool | None:
    """Whether two graphs differ at user line ``at`` by the shapes of its instructions (an
    internal size), not only by a constant's value: True, False, or None when the graphs do
    not say (no line, or digests of a run recorded before lazyscope told them apart). A size
    at any changed line counts: the line that makes it may be a library's (F.interpolate)."""
    if at is None:
        return None
    a, b = new.lines.get((at.file, at.line)), old.lines.get((at.file, at.line))
    if a is None or b is None or ":" not in a or ":" not in b:
        return None
    pairs_ = [(d, old.lines.get(k)) for k, d in new.lines.items()]
    return any(o is not None and ":" in d and ":" in o and d.split(":")[1] != o.split(":")[1]
               for d, o in pairs_)


def _first_changed_line(new: _Graph, old: _Graph, *, last: bool = False) -> Frame | None:
    """The first user line (in graph order) whose instructions differ between two graphs, by
    the HLO's source metadata; None when the graphs carry none. ``last``: the last such line in
    the source instead, for a special scalar: the line that consumes the value
    (``p.sub_(lr * p.grad)``), not a loss line before it whose lowering differs too (a graph
    compiled in a steady step has its lines from a lowering of the pending graph, whose
    instruction order is not the same from one process to the next)."""
    if not new.lines or not old.lines:
        return None
    order = sorted(new.lines, reverse=True) if last else list(new.lines)
    for (file, line) in order:
        if old.lines.get((file, line)) != new.lines[(file, line)]:
            return Frame(file, line)
    return None


# --------------------------------------------------------------------------- per family


def _site_key(stack: Stack, data: Compile) -> tuple[Any, ...]:
    site = user_site(stack)
    where = (site.file, site.line) if site else ("", 0)
    if data.function:  # a compiled function (dynamo), at the line that calls it
        return ("fn", data.function, *where)
    return ("at", *where)


def _varying(recompiles: Iterable[Recompile]) -> list[Varying]:
    """Inputs whose dims (or values) changed across a family's graphs, with the values seen;
    growing when every change made the dimension larger."""
    seen: dict[tuple[Any, ...], Varying] = {}
    order: dict[tuple[Any, ...], list[Any]] = {}
    # each key's values so far as a set too: ``x not in v.values`` over a list was quadratic
    # (a family of 1024 lengths is a million comparisons, per call)
    known: dict[tuple[Any, ...], set[Any]] = {}
    for r in recompiles:
        pairs_seen: set[tuple[Any, ...]] = set()
        for c in r.changes:
            if c.what not in ("dim", "value", "rank", "dtype", "count") or (
                    c.what == "count" and c.input == "inputs"):
                continue
            key = (c.input, c.what, c.index)
            if (key, repr(c.before), repr(c.after)) in pairs_seen:
                continue  # two inputs of one signature changed alike: one change of the key
            pairs_seen.add((key, repr(c.before), repr(c.after)))
            v = seen.get(key)
            if v is None:
                v = seen[key] = Varying(c.input, c.what, c.index, [], origin=c.origin)
                order[key] = []
                known[key] = set()
            values = known[key]
            for x in (c.before, c.after):
                if x is None:
                    continue
                try:
                    if x in values:
                        continue
                    values.add(x)
                except TypeError:  # an unhashable value (a list): the list's own test
                    if x in v.values:
                        continue
                v.values.append(x)
            order[key].append((c.before, c.after))
            if v.origin is None:
                v.origin = c.origin
    out = []
    for key, v in seen.items():
        try:
            v.values = sorted(v.values)
        except TypeError:
            v.values = sorted(v.values, key=str)
        pairs_ = order[key]
        # every change made it larger, and each new size is larger than the last: a size that
        # follows the step (the closest earlier graph a change is diffed against need not be
        # the one just before, so the pairs need not chain)
        v.growing = v.what in ("dim", "count") and len(pairs_) >= 3 and all(
            isinstance(a, int) and isinstance(b, int) and b > a for a, b in pairs_) and all(
            p[1] < q[1] for p, q in zip(pairs_, pairs_[1:], strict=False))
        out.append(v)
    return out


def _executions(ev: EventTable) -> tuple[dict[int, int], dict[int, int]] | None:
    """``({graph key id: executions}, {graph key id: last step it ran})`` from the run's
    ``execute`` events; None when the run recorded none (executions per graph unknown)."""
    sel = ev.indices("execute")
    if not len(sel):
        return None
    keys = ev.key[sel].astype(np.int64)
    total = np.bincount(keys, weights=ev.value[sel])
    last = np.full(len(total), -1, dtype=np.int64)
    np.maximum.at(last, keys, ev.step[sel])
    present = np.flatnonzero(last >= 0)
    return ({int(k): int(round(total[k])) for k in present},
            {int(k): int(last[k]) for k in present})


def warmup_end(run: Run) -> int:
    """The first step of the run's steady state: the start of its first stretch of QUIET_STEPS
    steps that compiled nothing (the number of steps when there is none)."""
    compiles = run.steps.col("compile_count")
    n = len(run.steps)
    if compiles is None:  # not measured: from the compile events
        compiles = np.bincount(np.clip(run.events.step[run.events.indices("compile")], 0, n),
                               minlength=n + 1)[:n]
    if n < QUIET_STEPS:
        return n
    # the first window of QUIET_STEPS steps that all compiled nothing (vectorised: a run of a
    # million steps that always compiles is a million windows)
    quiet = np.concatenate(([0], np.cumsum(np.asarray(compiles[:n]) == 0)))
    starts = np.flatnonzero(quiet[QUIET_STEPS:] - quiet[:-QUIET_STEPS] == QUIET_STEPS)
    return int(starts[0]) if len(starts) else n


def explain_recompiles(run: Run) -> list[SiteCompiles]:
    """One entry per family of user graphs, the costliest first (see the module docstring).

    Linear in the compilations: each distinct (stack, payload) is decoded once; only the first
    compile of each graph id is diffed (through its family's index); a graph id compiled again
    (the compile cache dropped it) is counted with numpy."""
    ev = run.events
    # graphs the trace met compiled already (the backend's in-process cache) are graphs new to
    # the run as much as the ones it compiled
    idx, pair_stack, pair_payload, inverse = pairs(ev, ("compile", "cached"))
    if not len(idx):
        return []
    steps = ev.step[idx]
    if len(steps) > 1 and not (steps[1:] >= steps[:-1]).all():  # recorded order is step order
        order = np.argsort(steps, kind="stable")
        idx, inverse = idx[order], inverse[order]
    # per distinct (stack, payload): the site it belongs to (-1: not the program's)
    site_keys: dict[tuple[Any, ...], int] = {}
    sites: list[tuple[Frame | None, Stack, str, str]] = []
    combo_site = np.full(len(pair_stack), -1, dtype=np.int64)
    backward: list[int] = []
    for n, (sid, pid) in enumerate(zip(pair_stack.tolist(), pair_payload.tolist(), strict=True)):
        data: Compile | None = ev.payload_of(pid)
        if data is None or data.owner == OWNER_LIBRARY:
            continue
        if data.phase == "backward":
            backward.append(n)
            continue
        stack = ev.stack_of(sid)
        key = _site_key(stack, data) + (data.phase,)
        if key not in site_keys:
            site_keys[key] = len(sites)
            sites.append((user_site(stack), tuple(user_frames(stack)), data.phase,
                          data.function))
        combo_site[n] = site_keys[key]
    event_site = combo_site[inverse]
    known = _executions(ev)
    context = _context(run, known)
    families: list[SiteCompiles] = []
    forward_family: dict[str, SiteCompiles] = {}
    for s_no, (site, stack, phase, function) in enumerate(sites):
        sel = idx[event_site == s_no]
        found = _explain_site(context, site, stack, phase, function, sel, forward_family)
        families += _by_site(context, found, site, stack, phase, function, sel)
    for n in backward:  # a backward compile belongs to its forward's family
        sel = idx[inverse == n]
        data = ev.payload_of(int(pair_payload[n]))
        seconds = float(ev.seconds[sel].sum())
        fam = forward_family.get(data.forward_of or "")
        if fam is not None:
            fam.backward_seconds += seconds
        else:  # its forward was not seen: a family of its own
            stack = ev.stack_of(int(pair_stack[n]))
            families.append(SiteCompiles(
                site=user_site(stack), stack=tuple(user_frames(stack)), phase="backward",
                function=data.function, compiles=len(sel), graphs=len(sel),
                first_step=int(ev.step[sel[0]]), seconds=seconds, classes={FIRST: len(sel)}))
    families.sort(key=lambda s: (-s.counted_seconds, -s.counted_count, s.first_step))
    return families


@dataclass
class _Context:
    run: Run
    executions: tuple[dict[int, int], dict[int, int]] | None
    steady_from: int
    #: the run's steady step time (steps that compiled nothing; all steps when none)
    step_seconds: float = 0.0
    #: the steps the outlook is priced over
    horizon: int = DEFAULT_HORIZON
    #: the largest size a varying length can take, when the run says
    largest: int | None = None
    #: the steps of the user's whole run, when the run says
    planned: int | None = None
    #: what the run's loader watch saw of its data loaders
    loaders: list[dict[str, Any]] | None = None


def _context(run: Run, known: tuple[dict[int, int], dict[int, int]] | None) -> _Context:
    return _Context(run, known, warmup_end(run), step_run_seconds(run), *_horizon(run),
                    loaders=run.meta.run_info.loaders)


def step_run_seconds(run: Run) -> float:
    """What a step costs without compiling: the median wall time of the steps that compiled
    nothing (at least 3 of them), else the median of every step's wall time less its compile
    time (a run that compiled in every step)."""
    walls = run.steps.col("wall_s")
    if walls is None or not len(walls):
        return 0.0
    w = np.asarray(walls, dtype=float)
    compiles = run.steps.col("compile_count")
    if compiles is not None:
        quiet = w[(np.asarray(compiles) == 0) & np.isfinite(w)]
        if len(quiet) >= 3:
            return float(np.median(quiet))
    spent = run.steps.col("compile_s")
    if spent is not None:
        w = w - np.nan_to_num(np.asarray(spent, dtype=float))
    w = w[np.isfinite(w)]
    return float(max(0.0, np.median(w))) if len(w) else 0.0


def _horizon(run: Run) -> tuple[int, int | None, int | None]:
    """(the steps to price over, the largest length, the user's whole run) from the run."""
    steps = len(run.steps)
    work = run.meta.run_info.workload
    planned, largest = work.planned_steps, work.max_len
    if planned is not None and planned > steps:
        return planned - steps, largest, planned
    return DEFAULT_HORIZON, largest, None


def _by_site(ctx: _Context, families: list[SiteCompiles], site: Frame | None, stack: Stack,
             phase: str, function: str, sel: np.ndarray) -> list[SiteCompiles]:
    """Novelty by site: the families of an XLA graph site judged as one when, together, they
    keep making graphs never run before (a list of device tensors stacked or concatenated each
    step has one more input every step, so each of its graphs is a family of its own), or under
    a fixed warm-up (every graph new to the site from that step on counts, whatever family it
    starts). The site's families stay apart when one of them already churns (its finding is the
    more precise) or when, together, they are a bounded set."""
    if phase != "graph" or len(families) < 2 or any(f.verdict == CHURN for f in families):
        return families
    # the families of one graph each, judged together (the others are bounded sets of their
    # own: buckets of the train step, the eval step ...)
    singles = [f for f in families if f.graphs == 1]
    if len(singles) >= 2:
        ev = ctx.run.events
        ids = {ev.key_of(int(k)): int(k) for k in np.unique(ev.key[sel])}
        mine = [ids[f.uses[0].graph] for f in singles if f.uses and f.uses[0].graph in ids]
        [joined] = _explain_site(ctx, site, stack, phase, function,
                                 sel[np.isin(ev.key[sel], mine)], {}, by_site=True)
        if joined.verdict == CHURN or (joined.verdict == FIXED and joined.counted_count >
                                       sum(f.counted_count for f in singles)):
            joined.site_wide = True
            return [joined, *[f for f in families if f.graphs > 1]]
    [whole] = _explain_site(ctx, site, stack, phase, function, sel, {}, by_site=True)
    if whole.verdict != FIXED and not any(f.verdict == LATE for f in families):
        # a graph of other ops that replaced the site's graphs after warm-up (a length change
        # that also took another Python branch on the shape): a one-off, as a size change is;
        # one that joins them (an eval step beside the train step) is not
        switches = [r for r in whole.recompiles if r.cls == STRUCTURE
                    and r.step >= ctx.steady_from and _replaced(whole, r)
                    and any(c.what == "dim" for c in r.changes)
                    and not any(c.what == "count" for c in r.changes)]
        if switches and len(switches) < MANY_LATE:
            for r in whole.recompiles:
                r.counted = r in switches
            whole.verdict, whole.site_wide = LATE, True
            whole.varying = _varying(whole.counted)
            return [whole]
    return families


def _replaced(fam: SiteCompiles, rec: Recompile) -> bool:
    """The graph of ``rec`` ran again after its step while every graph compiled before it never
    ran from that step on: the program switched to it."""
    mine = next((u for u in fam.uses if u.graph == rec.graph), None)
    earlier = [u for u in fam.uses if u.step < rec.step]
    return mine is not None and mine.last_step is not None and mine.last_step > rec.step and \
        bool(earlier) and all(u.last_step is not None and u.last_step < rec.step
                              for u in earlier)


def _explain_site(ctx: _Context, site: Frame | None, stack: Stack, phase: str, function: str,
                  sel: np.ndarray, forward_family: dict[str, SiteCompiles], *,
                  by_site: bool = False) -> list[SiteCompiles]:
    """The families of one site from its compile events ``sel`` (indices, in step order);
    ``by_site``: one family of every graph of the site (:func:`_by_site`)."""
    ev = ctx.run.events
    keys = ev.key[sel]
    steps = ev.step[sel]
    seconds = ev.seconds[sel]
    # the first compile of each graph id (events without an id are each their own graph)
    _, first = id_first(keys)
    is_first = np.zeros(len(sel), dtype=bool)
    is_first[first] = True
    is_first |= keys == 0
    graphs: dict[int, _Graph] = {}
    fams: dict[tuple[Any, ...], tuple[SiteCompiles, _SiteIndex, list[int]]] = {}
    family_of_key: dict[int, SiteCompiles] = {}
    first_step: dict[int, int] = {}
    # plain lists for the loop: a numpy scalar per read costs more than the work here
    firsts = np.flatnonzero(is_first)
    pids, key_l = ev.payload[sel[firsts]].tolist(), keys[firsts].tolist()
    step_l, second_l = steps[firsts].tolist(), seconds[firsts].tolist()
    for pos, pid, key, step, secs in zip(firsts.tolist(), pids, key_l, step_l, second_l,
                                         strict=True):
        data: Compile = ev.payload_of(pid)
        g = graphs.get(pid)
        if g is None:
            g = graphs[pid] = _Graph(data)
        family = ("site",) if by_site else g.family
        entry = fams.get(family)
        if entry is None:
            fam = SiteCompiles(site=site, stack=stack, phase=phase, function=function,
                               compiles=0, graphs=0, first_step=step, seconds=0.0)
            entry = fams[family] = (fam, _SiteIndex(), [])
        fam, index, members = entry
        members.append(pos)
        family_of_key[key] = fam
        first_step[key] = step
        graph = ev.key_of(key)
        if data.phase == "forward" and graph:
            forward_family[graph] = fam
        for d in data.dynamic or []:
            if d not in fam.dynamic:
                fam.dynamic.append(d)
        runs = _runs(ctx, key)
        last = ctx.executions[1].get(key) if ctx.executions is not None else None
        fam.uses.append(GraphUse(graph, step, secs, runs, last))
        fam.graphs += 1
        fam.compiles += 1
        fam.seconds += secs
        near = index.closest(g)
        index.add(graph, g)
        if near is None:
            fam.classes[FIRST] = fam.classes.get(FIRST, 0) + 1
            continue
        if data.changes is not None and g.named is None:
            cls, changes = VARIANT, list(data.changes)  # only the backend's guards to go on
        elif g.named is not None and near[1].named is not None and not _diff_named(
                g.named, near[1].named) and data.changes:
            # the same arguments, yet the guards failed: on something the arguments do not
            # show (a value on the stack across a graph break, a global, a module's state)
            cls, changes = VARIANT, list(data.changes)
        else:
            cls, changes = diff_graphs(g, near[1])
        fam.classes[cls] = fam.classes.get(cls, 0) + 1
        fam.recompiles.append(Recompile(step, secs, graph, near[0],
                                        cls, changes, executions=runs))
    # graph ids compiled again (the compile cache dropped them), counted per graph id at once:
    # a long run can hold hundreds of thousands of them
    repeats = np.flatnonzero(~is_first)
    warmup = ctx.run.meta.warmup_steps
    # key ids are small interned ints: grouped by counting, not by np.unique's sort
    rk = keys[repeats]
    counts = np.bincount(rk)
    rep_keys = np.flatnonzero(counts)
    narrow = rk.astype(np.uint16) if len(counts) <= 1 << 16 else rk  # a radix sort
    by_key = repeats[np.argsort(narrow, kind="stable")]  # each key's repeats, in step order
    ends = np.cumsum(counts[rep_keys]).tolist()
    evicted_steps: dict[int, list[np.ndarray]] = {}
    for k, key in enumerate(rep_keys.tolist()):
        fam = family_of_key[key]
        at = by_key[(ends[k - 1] if k else 0):ends[k]]
        counted_at = at if warmup is None else at[steps[at] >= warmup]
        if phase == OPS:
            # an op compiled again in the step of its first compile ran on another shape in
            # the same pass (a second layer): warm-up; in a later step, a new shape
            counted_at = counted_at[steps[counted_at] > first_step[key]]
        fam.compiles += len(at)
        fam.seconds += float(seconds[at].sum())
        fam.evicted.total += len(at)
        fam.evicted.count += len(counted_at)
        fam.evicted.seconds += float(seconds[counted_at].sum())
        evicted_steps.setdefault(id(fam), []).append(steps[counted_at])
    out = []
    for fam, _, _ in fams.values():
        if fam.evicted.total:
            fam.classes[EVICTED] = fam.evicted.total
        mine = evicted_steps.get(id(fam))
        if mine:  # one concatenation per family (per graph id, a long run copied quadratically)
            fam.evicted.steps = np.concatenate([fam.evicted.steps, *mine]).astype(np.int64)
        fam.evicted.steps = distinct(fam.evicted.steps)
        makers = [shape_maker([x for x in v.values if isinstance(x, int)],
                              ctx.loaders)
                  for v in _varying(fam.recompiles) if v.what == "dim"]
        found = [m for m in makers if m is not None]
        fam.maker = max(found, key=lambda m: m.matched) if found else None
        _judge(fam, ctx)
        fam.last_batch = _partial_batch(fam, ctx)
        fam.varying = _varying(fam.counted if fam.verdict in (CHURN, LATE, FIXED)
                               else fam.recompiles)
        out.append(fam)
    return out


def _one_off(fam: SiteCompiles, rec: Recompile) -> bool:
    """A late variant worth a note: a switch (the family's earlier graphs never run again) or
    rare (see the module docstring); always when executions are not recorded."""
    if not fam.executions_known:
        return True
    uses = {u.graph: u for u in fam.uses}
    mine = uses.get(rec.graph)
    earlier = [u for u in fam.uses if u.step < rec.step]
    if mine is None or not earlier:
        return True
    switched = all(u.last_step is not None and u.last_step < rec.step for u in earlier)
    most = max(u.executions or 0 for u in fam.uses)
    rare = (mine.executions or 0) <= max(2, RARE_SHARE * most)
    return switched or rare


def _runs(ctx: _Context, key_id: int) -> int | None:
    if ctx.executions is None or key_id == 0:
        return None
    return ctx.executions[0].get(key_id, 0)


def declared_buckets(fam: SiteCompiles, run: Run) -> list[int]:
    """The declared bucket lengths (``meta.json`` info ``declared_buckets``, or the
    multiples a Hugging Face collator with ``pad_to_multiple_of`` makes: :func:`multiple_buckets`)
    when every recompilation of ``fam`` only moves dimensions between them and the family has no
    more graphs than there are buckets; else ``[]``."""
    sizes = set(run.meta.run_info.declared_buckets or ())
    if not sizes:
        sizes = set(multiple_buckets(fam))
    if not sizes or not fam.recompiles or fam.graphs > len(sizes):
        return []
    for r in fam.recompiles:
        if not r.changes or any(c.what != "dim" or c.before not in sizes or c.after not in sizes
                                for c in r.changes):
            return []
    return sorted(sizes)


def multiple_buckets(fam: SiteCompiles) -> list[int]:
    """The lengths a loader's collator that pads to a multiple (``pad_to_multiple_of=N``, which
    the trace recorded) can make: the multiples of N up to the largest length seen (or the
    collator's ``max_length``); [] when the family's loader does not pad so."""
    m = fam.maker
    n = m.collate.get("pad_to_multiple_of") if m is not None else None
    if m is None or not isinstance(n, int) or isinstance(n, bool) or n < 2:
        return []
    seen = [x for v in _varying(fam.recompiles) if v.what == "dim" for x in v.values
            if isinstance(x, int)] + m.sizes
    if not seen or any(x % n for x in seen):
        return []
    cap = m.collate.get("max_length")
    top = max(max(seen), cap if isinstance(cap, int) and not isinstance(cap, bool) else 0)
    return list(range(n, top + 1, n))


def _partial_batch(fam: SiteCompiles, ctx: _Context | None = None) -> bool:
    """Two graphs, the second made for a *smaller* size of the batch dimension (dim 0), run no
    more than the first and never in two steps in a row: a smaller last batch of an epoch. A
    batch that grew (5 -> 6), or changed and kept its new size (run in the steps after), is
    not one."""
    if fam.graphs != 2 or len(fam.recompiles) != 1 or fam.dynamic:
        return False
    changes = fam.recompiles[0].changes
    if not changes or any(c.what != "dim" or c.index != 0 for c in changes):
        return False
    if not all(isinstance(c.before, int) and isinstance(c.after, int) and c.after < c.before
               for c in changes):
        return False
    runs = [u.executions for u in fam.uses]
    if None in runs:
        return True
    if (runs[1] or 0) > (runs[0] or 0):
        return False
    steps = _run_steps(ctx, fam.uses[1].graph) if ctx is not None else None
    return steps is None or not bool(np.any(np.diff(steps) == 1))


def _run_steps(ctx: _Context, graph: str) -> np.ndarray | None:
    """The steps a graph ran in (its ``execute`` events), sorted; None when not recorded."""
    ev = ctx.run.events
    sel = ev.indices("execute")
    if not len(sel) or not graph:
        return None
    keys = {ev.key_of(int(k)): int(k) for k in np.unique(ev.key[sel])}
    kid = keys.get(graph)
    if kid is None:
        return None
    return np.unique(ev.step[sel[ev.key[sel] == kid]])


def family_outlook(fam: SiteCompiles, ctx: _Context) -> Outlook:
    """The family's graphs still expected over the user's run, from its executions
    (:mod:`lazyscope.analyze.novelty`)."""
    runs = [u.executions or 0 for u in fam.uses]
    first_calls = _first_calls(fam, ctx)
    seconds = sorted(u.seconds for u in fam.uses)
    varying = [v for v in _varying(fam.recompiles) if v.what == "dim"]
    sizes = None
    if len({(v.input, v.index) for v in varying}) == 1:
        sizes = [x for x in varying[0].values if isinstance(x, int)]
    # the loader that makes the sizes has often made more than the steps used (it works ahead):
    # the sizes it made that no graph of the family has yet are graphs still to come
    ahead = 0
    if fam.maker is not None and sizes is not None:
        ahead = len(set(fam.maker.sizes) - set(sizes))
        sizes = sorted(set(sizes) | set(fam.maker.sizes))
    return outlook(runs, first_calls, steps=max(1, len(ctx.run.steps)),
                   seconds_each=seconds[len(seconds) // 2] if seconds else 0.0,
                   step_seconds=ctx.step_seconds, horizon_steps=ctx.horizon,
                   sizes=sizes, largest=ctx.largest, planned=ctx.planned,
                   late_share=_late_share(fam, ctx.run), late=_late_by_step(fam, ctx),
                   ahead=ahead)


def _late_by_step(fam: SiteCompiles, ctx: _Context) -> tuple[int, int] | None:
    """(graphs first made, family calls) in the second half of the run's steps; None when the
    run has too few steps to halve (the family's own calls are halved instead)."""
    n = len(ctx.run.steps)
    if n < 4:
        return None
    half = n // 2
    ev = ctx.run.events
    sel = ev.indices("execute")
    keys = {ev.key_of(int(k)): int(k) for k in np.unique(ev.key[sel])} if len(sel) else {}
    mine = [keys[u.graph] for u in fam.uses if u.graph in keys]
    hit = sel[np.isin(ev.key[sel], mine) & (ev.step[sel] >= half)] if mine else sel[:0]
    calls = int(round(float(ev.value[hit].sum())))
    new = sum(1 for u in fam.uses if u.step >= half)
    return new, max(calls, new)


def _late_share(fam: SiteCompiles, run: Run) -> float:
    """The share of the run's second half (by steps) spent compiling the family's graphs first
    made in it."""
    n = len(run.steps)
    walls = run.steps.col("wall_s")
    if n < 2 or walls is None:
        return 0.0
    half = n // 2
    wall = float(np.nansum(np.asarray(walls, dtype=float)[half:]))
    spent = sum(u.seconds for u in fam.uses if u.step >= half)
    return spent / wall if wall > 0 else 0.0


def _first_calls(fam: SiteCompiles, ctx: _Context) -> list[int]:
    """For each graph of the family, the family's executions before the step it was first
    compiled in: where in the family's calls it was new."""
    ev = ctx.run.events
    sel = ev.indices("execute")
    graph_keys = {ev.key_of(int(k)): int(k) for k in np.unique(ev.key[sel])} if len(sel) else {}
    mine = [graph_keys[u.graph] for u in fam.uses if u.graph in graph_keys]
    if not mine:
        return list(range(len(fam.uses)))
    hit = sel[np.isin(ev.key[sel], mine)]
    steps, values = ev.step[hit], ev.value[hit]
    order = np.argsort(steps, kind="stable")
    steps, cum = steps[order], np.cumsum(values[order])
    out = []
    for k, u in enumerate(fam.uses):
        before = int(np.searchsorted(steps, u.step, side="left"))
        # the k-th graph (in compile order) came after k calls at least: graphs made within
        # one step (no barrier) keep their order
        out.append(max(k, int(round(cum[before - 1])) if before > 0 else 0))
    return out


def _judge(fam: SiteCompiles, ctx: _Context) -> None:
    """Set the family's verdict and which of its recompilations count (module docstring)."""
    warmup = ctx.run.meta.warmup_steps
    recs = fam.recompiles
    if fam.phase == OPS:
        # ops run eagerly (torchax): the backend caches each op's program by shape, so an op
        # compiled again at a line met a new shape; two or more such repeats churn
        fam.verdict = CHURN if fam.evicted.count >= CHURN_ONE_SHOTS else (
            SINGLE if fam.graphs == 1 else REUSED)
        fam.evicted.count = fam.evicted.count if fam.verdict == CHURN else 0
        return
    if warmup is not None:
        for r in recs:
            r.counted = r.step >= warmup
        fam.verdict = FIXED if fam.counted_count else (SINGLE if fam.graphs == 1 else REUSED)
        return
    buckets = declared_buckets(fam, ctx.run)
    if buckets:
        # the program pads to lengths it declared: a bounded set, however few steps the run
        # has to reuse each (a short run meets some buckets late): warm-up, a reuse note
        fam.declared = buckets
        fam.verdict = REUSED
        return
    if fam.executions_known:
        fam.outlook = family_outlook(fam, ctx)
        churn = fam.outlook.keeps_compiling
    else:  # executions per graph unknown: two or more variants of the first graph churn
        variants = [r for r in recs if r.cls in (VARIANT, IDENTICAL)]
        churn = len(variants) >= CHURN_ONE_SHOTS
    # graphs compiled again after the cache dropped them: pure waste, a churn from two on
    churn = churn or fam.evicted.count >= CHURN_ONE_SHOTS
    if churn:
        for r in recs:
            r.counted = True
        fam.verdict = CHURN
        return
    late = [r for r in recs if r.step >= ctx.steady_from and r.cls != STRUCTURE
            and _one_off(fam, r)]
    if fam.dynamic and not late:
        # torch.compile switched a dimension to dynamic after recompiling for it: one
        # recompilation, worth knowing (marked dynamic up front it is none)
        late = [r for r in recs if r.cls == VARIANT][:1]
    if not late and _partial_batch(fam, ctx):
        # a smaller last batch each epoch, reused every epoch: not bucketing, a one-off to
        # drop or pad (DataLoader(drop_last=True)), said as a note
        late = recs[:1]
    for r in late:
        r.counted = True
    if len(late) >= MANY_LATE:
        fam.verdict, fam.outlook = CHURN, None  # recompiles again and again: not a one-off
    elif late or fam.evicted.count:
        fam.verdict = LATE
    elif fam.outlook is not None and fam.outlook.expected_new >= MIN_NEW:
        # new graphs keep coming, yet they compile so fast that they cost the run nothing
        # worth a finding: not bucketing either, so no reuse note
        fam.verdict = CHEAP
    else:
        fam.verdict = REUSED if fam.graphs > 1 else SINGLE


def library_compiles(events: EventTable) -> int:
    """Compilations of graphs a library made for its own bookkeeping."""
    idx = np.flatnonzero(events.kind == KIND_CODE["compile"])
    n = 0
    for pid, count in zip(*id_counts(events.payload[idx]), strict=True):
        data = events.payload_of(int(pid))
        if data is not None and data.owner == OWNER_LIBRARY:
            n += int(count)
    return n


def merge_changes(changes: list[Change]) -> list[tuple[Change, int]]:
    """Identical changes (several inputs of one signature changing the same way) once each,
    with how many inputs changed so."""
    seen: dict[tuple[Any, ...], list[Any]] = {}
    for c in changes:
        key = (c.input, c.what, c.index, repr(c.before), repr(c.after), c.text)
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [c, 1]
    return [(c, n) for c, n in seen.values()]


def changes_text(changes: list[Change], limit: int = 3) -> str:
    """``x dim 1: 8 -> 12; the f32[4] input dtype f32 -> bf16``."""
    parts = []
    merged = merge_changes(changes)
    for c, n in merged[:limit]:
        times = f" (x{n} inputs)" if n > 1 else ""
        if c.text and c.what in ("guard", "value"):
            parts.append(c.text)
        elif c.what == "dim":
            parts.append(f"{c.input} dim {c.index}: {c.before} -> {c.after}{times}")
        elif c.what == "ops":
            parts.append(f"{c.text} x{c.before} -> x{c.after}")
        elif c.what == "constant":
            parts.append(c.text)
        elif c.what == "count":
            many = "" if c.input == "inputs" else "s"
            parts.append(f"{c.input}{many}: {c.before} -> {c.after}")
        else:
            parts.append(f"{c.input} {c.what} {c.before} -> {c.after}{times}")
    if len(merged) > limit:
        parts.append(f"... {len(merged) - limit} more")
    return "; ".join(parts)


def closest_difference(new: Compile, others: list[Compile]) -> tuple[Frame | None, list[Change]]:
    """What ``new`` changes against the closest of ``others`` (another process's graphs: the
    same family first, then the fewest changes), and the user line that makes the change;
    ``(None, [])`` with nothing to compare it with."""
    if not others:
        return None, []
    g = _Graph(new)
    best: tuple[int, Frame | None, list[Change]] | None = None
    for data in others:
        o = _Graph(data)
        _cls, changes = diff_graphs(g, o)
        rank = (0 if o.family == g.family else 1000) + len(changes)
        if best is None or rank < best[0]:
            line = next((c.origin for c in changes if c.origin is not None), None) \
                or _first_changed_line(g, o)
            best = (rank, line, changes)
    assert best is not None
    return best[1], best[2]
