"""Why did it recompile? Group compilations by site and diff each graph against the closest
graph compiled before it there, by content.

A *site* is where graphs are compiled: for XLA the user line where the graph was cut (the step
barrier, or a value read), for torch.compile the compiled function. Library-owned graphs
(the backend's own bookkeeping) are not analysed as the program's.

Each compilation gets a class:

* ``first``: the site's first graph;
* ``structure``: the graph differs from every earlier one at the site in its number of inputs or
  the kinds of ops it runs: a new phase or new state (the first optimizer step that creates
  momentum/Adam state, an eval pass, gradient accumulation's optimizer step);
* ``variant``: the same structure with other shapes, dtypes, constants or guarded values: the
  kind of recompilation that repeats as the data changes;
* ``identical``: same graph, same inputs (the backend re-compiled an identical graph, e.g. when
  buffer donation settled).

A site's *recompiles* are its variants plus its structure changes beyond the first
:data:`STRUCTURE_WARMUP` graphs. A site with two or more recompiles keeps compiling variants:
a finding. One recompile is a one-off worth knowing (a last partial batch, a cast added
mid-run): a note. With a fixed warm-up (``meta.warmup_steps``, ``--warmup-steps``) every
compilation at or after that step counts instead.

The closest earlier graph is found through an index (linear in the compilations): an identical
input multiset, else one that differs by one input (multiset hash minus one element), else the
latest graph of the same structure, else the site's latest graph. Graph inputs are compared as a
multiset of (dtype, shape) signatures, so a reordering of the parameters is no change. Pure
functions: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from lazyscope.analyze.events import distinct, id_counts, id_first, pairs
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

#: graphs of new structure (the first included) a site may compile before they count
STRUCTURE_WARMUP = 3

FIRST, STRUCTURE, VARIANT, IDENTICAL = "first", "structure", "variant", "identical"
#: a graph id compiled again at its site (the compile cache dropped it)
EVICTED = "evicted"


@dataclass
class Recompile:
    """One compilation after its site's first, explained against the closest earlier graph."""

    step: int
    seconds: float
    graph: str
    closest: str
    cls: str
    changes: list[Change]
    counted: bool = False


@dataclass
class Varying:
    """An input dimension (or a value) whose size differs between the graphs of one site."""

    input: str
    what: str
    index: int | None
    values: list
    #: every change made it larger (a tensor accumulated across steps: torch.cat onto a
    #: running tensor), as opposed to values that come and go
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
        return f"{self.input} takes {shown}"


@dataclass
class Evicted:
    """Compilations of graph ids already compiled at the site (cache evictions)."""

    count: int = 0
    seconds: float = 0.0
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    total: int = 0


@dataclass
class SiteCompiles:
    """Every compilation at one site, explained."""

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


def _h(item: tuple) -> int:
    return hash(item) & _MASK


#: HLO ops a dtype change adds or removes
_CASTS = frozenset({"convert", "bitcast-convert"})


class _Graph:
    """A compiled graph's content, indexed: its inputs as a multiset, its hashes. Built once per
    distinct payload."""

    __slots__ = ("multiset", "hash", "structure", "ops", "digest", "names", "origins",
                 "lines", "num_inputs", "constants", "named")

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
        self.names: dict[tuple, str] = {}
        self.origins: dict[tuple, Frame] = {}
        # structure: how many inputs, of which ranks, and which kinds of ops (a cast adds
        # converts, which are not structure: a dtype change is a variant)
        op_kinds = tuple(sorted(k for k in (data.ops or {}) if k not in _CASTS))
        if data.inputs is not None:
            sigs = [i.signature() for i in data.inputs]
            self.multiset: Counter | None = Counter(sigs)
            self.hash = sum(_h(s) for s in self.multiset.elements()) & _MASK
            self.structure: tuple = (len(sigs), tuple(sorted(Counter(
                len(shape) for _, shape in sigs).items())), op_kinds)
            for i in data.inputs:
                if i.name:
                    self.names.setdefault(i.signature(), i.name)
                if i.origin is not None:
                    self.origins.setdefault(i.signature(), i.origin)
        else:
            self.multiset = None
            self.hash = 0
            self.structure = (data.num_inputs, (), op_kinds)


class _SiteIndex:
    """The closest-graph search of one site: O(inputs) per graph, not O(graphs). Entries are
    ``(graph id, graph)``."""

    def __init__(self) -> None:
        self.latest: tuple[str, _Graph] | None = None
        self.by_hash: dict[int, tuple[str, _Graph]] = {}
        self.by_minus_one: dict[int, tuple[str, _Graph]] = {}
        self.by_structure: dict[tuple, tuple[str, _Graph]] = {}

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
    changes: list[Change] = []
    cls = VARIANT if new.structure == old.structure else STRUCTURE
    # pair removed and added inputs: same dtype and rank first (a dimension changed), then
    # same shape (a dtype changed), then same rank (dtype and shape)
    rem = list(removed.elements())
    add = list(added.elements())
    for key in (lambda s: (s[0], len(s[1])), lambda s: s[1], lambda s: len(s[1])):
        pool: dict = {}
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
                                    origin=_first_changed_line(new, old))]
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
                                    origin=_first_changed_line(new, old))]
        changes.append(Change("inputs", "count", None, sum(old.multiset.values()),
                              sum(new.multiset.values())))
        cls = STRUCTURE
    if not changes:
        return _op_changes(new, old)
    return cls, changes


def _pair_changes(before: tuple, after: tuple, old: _Graph, new: _Graph) -> list[Change]:
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
    # shape inside the graph changed
    return VARIANT, [Change("graph", "constant", None, None, None,
                            text="same inputs and op counts; a constant or an internal shape "
                                 "differs", origin=origin)]


def _first_changed_line(new: _Graph, old: _Graph) -> Frame | None:
    """The first user line (in graph order) whose instructions differ between two graphs, by
    the HLO's source metadata; None when the graphs carry none."""
    if not new.lines or not old.lines:
        return None
    for (file, line), digest in new.lines.items():
        if old.lines.get((file, line)) != digest:
            return Frame(file, line)
    return None


# --------------------------------------------------------------------------- per site


def _site_key(stack: Stack, data: Compile) -> tuple:
    site = user_site(stack)
    where = (site.file, site.line) if site else ("", 0)
    if data.function:  # a compiled function (dynamo), at the line that calls it
        return ("fn", data.function, *where)
    return ("at", *where)


def _varying(site_recompiles: Iterable[Recompile]) -> list[Varying]:
    """Inputs whose dims (or values) changed across a site's recompilations, with the values
    seen; growing when every change made the dimension larger."""
    seen: dict[tuple, Varying] = {}
    order: dict[tuple, list] = {}
    for r in site_recompiles:
        for c in r.changes:
            if c.what not in ("dim", "value", "rank", "dtype"):
                continue
            key = (c.input, c.what, c.index)
            v = seen.get(key)
            if v is None:
                v = seen[key] = Varying(c.input, c.what, c.index, [], origin=c.origin)
                order[key] = []
            for x in (c.before, c.after):
                if x is not None and x not in v.values:
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
        pairs = order[key]
        v.growing = v.what == "dim" and len(pairs) >= 3 and all(
            isinstance(a, int) and isinstance(b, int) and b > a for a, b in pairs) and all(
            p[1] == q[0] for p, q in zip(pairs, pairs[1:], strict=False))
        out.append(v)
    return out


def explain_recompiles(run: Run) -> list[SiteCompiles]:
    """One entry per site that compiled user graphs, most counted seconds first.

    Linear in the compilations: each distinct (stack, payload) is decoded once; only the first
    compile of each graph id at a site is diffed (through the site's index); a graph id compiled
    again (the compile cache dropped it) is counted with numpy."""
    ev = run.events
    idx, pair_stack, pair_payload, inverse = pairs(ev, "compile")
    if not len(idx):
        return []
    steps = ev.step[idx]
    if len(steps) > 1 and not (steps[1:] >= steps[:-1]).all():  # recorded order is step order
        order = np.argsort(steps, kind="stable")
        idx, inverse = idx[order], inverse[order]
    # per distinct (stack, payload): the site it belongs to (-1: not the program's)
    site_keys: dict[tuple, int] = {}
    sites: list[SiteCompiles] = []
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
            sites.append(SiteCompiles(
                site=user_site(stack), stack=tuple(user_frames(stack)), phase=data.phase,
                function=data.function, compiles=0, graphs=0, first_step=-1, seconds=0.0))
        combo_site[n] = site_keys[key]
    event_site = combo_site[inverse]
    warmup = run.meta.warmup_steps
    forward_site: dict[str, int] = {}
    for s_no, entry in enumerate(sites):
        sel = idx[event_site == s_no]
        _explain_site(run, entry, sel, warmup, forward_site, s_no)
    for n in backward:  # a backward compile belongs to its forward's site
        sel = idx[inverse == n]
        data = ev.payload_of(int(pair_payload[n]))
        s_no = forward_site.get(data.forward_of or "")
        seconds = float(ev.seconds[sel].sum())
        if s_no is not None:
            sites[s_no].backward_seconds += seconds
        else:  # its forward was not seen: a site of its own
            stack = ev.stack_of(int(pair_stack[n]))
            sites.append(SiteCompiles(
                site=user_site(stack), stack=tuple(user_frames(stack)), phase="backward",
                function=data.function, compiles=len(sel), graphs=len(sel),
                first_step=int(ev.step[sel[0]]), seconds=seconds,
                classes={FIRST: len(sel)}))
    for entry in sites:
        entry.varying = _varying(entry.recompiles)
    sites.sort(key=lambda s: (-s.counted_seconds, -s.counted_count, s.first_step))
    return sites


def _explain_site(run: Run, entry: SiteCompiles, sel: np.ndarray, warmup: int | None,
                  forward_site: dict[str, int], s_no: int) -> None:
    """Fill ``entry`` from its compile events ``sel`` (indices, in step order)."""
    ev = run.events
    keys = ev.key[sel]
    steps = ev.step[sel]
    seconds = ev.seconds[sel]
    entry.compiles = len(sel)
    entry.seconds = float(seconds.sum())
    entry.first_step = int(steps[0])
    # the first compile of each graph id (events without an id are each their own graph)
    _, first = id_first(keys)
    is_first = np.zeros(len(sel), dtype=bool)
    is_first[first] = True
    is_first |= keys == 0
    index = _SiteIndex()
    graphs: dict[int, _Graph] = {}
    structures = 0
    same_content = 0
    for pos in np.flatnonzero(is_first):
        i = int(sel[pos])
        pid = int(ev.payload[i])
        data: Compile = ev.payload_of(pid)
        graph = ev.key_of(int(ev.key[i]))
        if data.phase == "forward" and graph:
            forward_site[graph] = s_no
        for d in data.dynamic or []:
            if d not in entry.dynamic:
                entry.dynamic.append(d)
        g = graphs.get(pid)
        if g is None:
            g = graphs[pid] = _Graph(data)
        near = index.closest(g)
        index.add(graph, g)
        entry.graphs += 1
        if near is None:
            entry.classes[FIRST] = entry.classes.get(FIRST, 0) + 1
            structures += 1
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
        entry.classes[cls] = entry.classes.get(cls, 0) + 1
        rec = Recompile(int(steps[pos]), float(seconds[pos]), graph, near[0], cls, changes)
        if cls == STRUCTURE:
            structures += 1
        if cls == IDENTICAL:
            same_content += 1
        if warmup is not None:
            rec.counted = rec.step >= warmup
        else:
            rec.counted = (cls == VARIANT or (cls == STRUCTURE and structures > STRUCTURE_WARMUP)
                           or (cls == IDENTICAL and same_content > 1))
        entry.recompiles.append(rec)
    repeats = np.flatnonzero(~is_first)
    if len(repeats):
        # a graph id compiled again: the compile cache dropped it (counted: pure waste)
        counted = steps[repeats] >= warmup if warmup is not None else np.ones(len(repeats), bool)
        entry.classes[EVICTED] = len(repeats)
        entry.evicted = Evicted(count=int(counted.sum()),
                                seconds=float(seconds[repeats][counted].sum()),
                                steps=distinct(steps[repeats][counted]),
                                total=len(repeats))


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
    seen: dict[tuple, list] = {}
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
            parts.append(f"{c.input}: {c.before} -> {c.after}")
        else:
            parts.append(f"{c.input} {c.what} {c.before} -> {c.after}{times}")
    if len(merged) > limit:
        parts.append(f"... {len(merged) - limit} more")
    return "; ".join(parts)
