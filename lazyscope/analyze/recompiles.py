"""Why did it recompile? Group compilations by the user's call site and diff each one against
the closest graph already compiled there.

Input: ``compile`` events as the XLA collector writes them (``data``: ``graph_hash``,
``num_inputs``, ``input_shapes``, ``input_dtypes``, ``ops``, ``ir_digest``, ``buffer_donors``,
``cause_kind``, ``cause``; shapes, ops and digest come from the graph's HLO). For each compilation after a site's first, the closest earlier graph at the same site
is the one with the fewest differing inputs (same input count first, the latest on ties); the
difference is stated as: the input count, an input's dtype, an input's shape (which dimension,
old -> new), the graph's op counts when shapes agree, or "same graph and input shapes" when
only what the graph text omits changed (e.g. which input buffers are donated to outputs, which
is part of torch_xla's graph hash: the hash changes, the graph does not).

Per site, the dimensions that vary over all its graphs are listed with their observed values:
"input 2 varies in dim 1 over 8 values in 5..61".

A compilation counts against the program (``counted``) when it happens after warm-up and is not
the first repeat of a graph already compiled at the site (that one-off is torch_xla settling, not
the program). Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lazyscope.model import Event, Run, Site


@dataclass
class Recompile:
    """One compilation after its site's first, explained against the closest earlier graph."""

    step: int
    seconds: float
    graph_hash: str
    closest_hash: str
    kind: str  # input_count | dtype | shape | ir | same_ir | unknown
    diff: list[str]
    cause_kind: str
    cause: str
    counted: bool


@dataclass
class Varying:
    """An input dimension whose size differs between the graphs of one site."""

    input: int
    dim: int
    values: list[int]
    #: the size only ever grew from one compilation to the next (a tensor accumulated across
    #: steps, e.g. torch.cat onto a running tensor), as opposed to sizes that come and go
    growing: bool = False

    def text(self) -> str:
        vals = self.values
        if len(vals) <= 4:
            shown = "{" + ", ".join(str(v) for v in vals) + "}"
            return f"input {self.input} varies in dim {self.dim} over {shown}"
        return (f"input {self.input} varies in dim {self.dim} over {len(vals)} values "
                f"in {vals[0]}..{vals[-1]}")


@dataclass
class SiteRecompiles:
    """Every compilation at one call site, explained."""

    site: Site | None
    compiles: int
    graphs: int
    first_step: int
    compiles_after_warmup: int
    counted: int
    counted_seconds: float
    counted_steps: list[int]
    recompiles: list[Recompile] = field(default_factory=list)
    varying: list[Varying] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    counted_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.site.file}:{self.site.line}" if self.site else "an unknown line"

    def summary(self) -> str:
        """``train.py:42 compiled 28 graphs; input 0 varies in dim 1 over 28 values in 1..255``."""
        text = f"{self.where} compiled {self.graphs} graph{'s' if self.graphs != 1 else ''}"
        if self.counted:
            text += f" ({self.counted} after warm-up)"
        kinds = self.counted_kinds or self.kinds
        reasons = [v.text() for v in self.varying] if kinds.get("shape") else []
        if not reasons:
            other = {k: n for k, n in kinds.items() if k not in ("shape", "same_ir")}
            reasons = [_KIND_TEXT[k] for k in other if k in _KIND_TEXT]
        if not reasons and kinds.get("same_ir"):
            reasons = [_KIND_TEXT["same_ir"]]
        return text + ("; " + "; ".join(reasons) if reasons else "")


_KIND_TEXT = {
    "input_count": "the number of graph inputs changes between graphs",
    "dtype": "an input's dtype changes between graphs",
    "ir": "the traced operations differ between graphs (Python control flow or code path)",
    "same_ir": "same graph and input shapes as an earlier graph (torch_xla internal state, "
               "such as which input buffers are donated)",
    "unknown": "no input shapes were recorded for these graphs",
}


def _shapes(event: Event) -> list[list[int]] | None:
    shapes = event.data.get("input_shapes")
    return shapes if isinstance(shapes, list) else None


def _dtypes(event: Event) -> list[str]:
    dtypes = event.data.get("input_dtypes")
    return dtypes if isinstance(dtypes, list) else []


def _distance(a: Event, b: Event) -> tuple[int, int]:
    sa, sb = _shapes(a), _shapes(b)
    if sa is None or sb is None:
        return (1, 0)
    if len(sa) != len(sb):
        return (1, abs(len(sa) - len(sb)))
    diff = 0
    for x, y in zip(sa, sb, strict=False):
        if len(x) != len(y):
            diff += 1
        else:
            diff += sum(1 for p, q in zip(x, y, strict=False) if p != q)
    diff += sum(1 for p, q in zip(_dtypes(a), _dtypes(b), strict=False) if p != q)
    return (0, diff)


def diff_graphs(new: Event, old: Event) -> tuple[str, list[str]]:
    """``(kind, differences)`` between two compiled graphs, most telling first."""
    sn, so = _shapes(new), _shapes(old)
    if sn is None or so is None:
        n_new, n_old = new.data.get("num_inputs"), old.data.get("num_inputs")
        if n_new is not None and n_old is not None and n_new != n_old:
            return "input_count", [f"input count {n_old} -> {n_new}"]
        return "unknown", ["no input shapes recorded"]
    if len(sn) != len(so):
        return "input_count", [f"input count {len(so)} -> {len(sn)}"]
    dn, do = _dtypes(new), _dtypes(old)
    out = [f"input {i} dtype {a} -> {b}"
           for i, (a, b) in enumerate(zip(do, dn, strict=False)) if a != b]
    if out:
        return "dtype", out
    for i, (a, b) in enumerate(zip(so, sn, strict=False)):
        if len(a) != len(b):
            out.append(f"input {i} rank {len(a)} -> {len(b)} ({a} -> {b})")
            continue
        for d, (p, q) in enumerate(zip(a, b, strict=False)):
            if p != q:
                out.append(f"input {i} dim {d}: {p} -> {q}")
    if out:
        return "shape", out
    if new.data.get("ir_digest") and new.data.get("ir_digest") == old.data.get("ir_digest"):
        donors_new, donors_old = new.data.get("buffer_donors"), old.data.get("buffer_donors")
        if donors_new is not None and donors_old is not None and donors_new != donors_old:
            return "same_ir", [f"same graph and input shapes; donated input buffers "
                               f"{{{donors_old or 'none'}}} -> {{{donors_new or 'none'}}}"]
        return "same_ir", ["same graph and input shapes"]
    ops_new: dict[str, int] = new.data.get("ops") or {}
    ops_old: dict[str, int] = old.data.get("ops") or {}
    changes = []
    for op in sorted(set(ops_new) | set(ops_old)):
        delta = ops_new.get(op, 0) - ops_old.get(op, 0)
        if delta:
            changes.append(f"{'+' if delta > 0 else ''}{delta} {op}")
    return "ir", ["graph differs: " + (", ".join(changes) if changes else "same op counts, "
                                    "different structure or constants")]


def _varying(events: list[Event]) -> list[Varying]:
    shaped = [s for s in (_shapes(e) for e in events) if s is not None]
    if len(shaped) < 2:
        return []
    # the most common structure (input count and ranks): warm-up graphs often have fewer inputs
    structures: dict[tuple[int, ...], list[list[list[int]]]] = {}
    for s in shaped:
        structures.setdefault(tuple(len(x) for x in s), []).append(s)
    same = max(structures.values(), key=len)
    ref = same[0]
    out = []
    for i, shape in enumerate(ref):
        for d in range(len(shape)):
            values = sorted({s[i][d] for s in same})
            if len(values) > 1:
                in_order = [s[i][d] for s in same]  # events are in step order
                growing = len(in_order) >= 3 and all(
                    b > a for a, b in zip(in_order, in_order[1:], strict=False))
                out.append(Varying(i, d, values, growing))
    return out


def _key(site: Site | None) -> tuple[str, int]:
    return (site.file, site.line) if site else ("", 0)


def explain_recompiles(run: Run) -> list[SiteRecompiles]:
    """One entry per call site that compiled, the sites with the most counted compiles first."""
    warmup = max(0, int(run.meta.warmup_steps))
    by_site: dict[tuple[str, int], list[Event]] = {}
    for event in run.events:
        if event.kind == "compile":
            by_site.setdefault(_key(event.site), []).append(event)
    result = []
    for events in by_site.values():
        events.sort(key=lambda e: e.step)
        entry = SiteRecompiles(
            site=events[0].site, compiles=len(events),
            graphs=len({e.data.get("graph_hash") or id(e) for e in events}),
            first_step=events[0].step,
            compiles_after_warmup=sum(1 for e in events if e.step >= warmup),
            counted=0, counted_seconds=0.0, counted_steps=[],
        )
        repeats: dict[Any, int] = {}
        for i, event in enumerate(events[1:], start=1):
            earlier = events[:i]
            closest = min(reversed(earlier), key=lambda o: _distance(event, o))
            kind, diff = diff_graphs(event, closest)
            if kind == "same_ir":
                key = event.data.get("ir_digest")
                repeats[key] = repeats.get(key, 0) + 1
            settling = kind == "same_ir" and repeats.get(event.data.get("ir_digest"), 0) == 1
            counted = event.step >= warmup and not settling
            entry.recompiles.append(Recompile(
                step=event.step, seconds=event.seconds,
                graph_hash=str(event.data.get("graph_hash", "")),
                closest_hash=str(closest.data.get("graph_hash", "")), kind=kind, diff=diff,
                cause_kind=str(event.data.get("cause_kind", "")),
                cause=str(event.data.get("cause", "")), counted=counted,
            ))
            entry.kinds[kind] = entry.kinds.get(kind, 0) + 1
            if counted:
                entry.counted_kinds[kind] = entry.counted_kinds.get(kind, 0) + 1
                entry.counted += 1
                entry.counted_seconds += event.seconds
                entry.counted_steps.append(event.step)
        entry.varying = _varying(events)
        result.append(entry)
    result.sort(key=lambda s: (-s.counted_seconds, -s.counted, s.first_step))
    return result


def recompile_fix(entry: SiteRecompiles) -> str:
    """A concrete fix for the recompilations of one site."""
    cause_read = any(r.cause_kind == "value_read" for r in entry.recompiles if r.counted)
    prefix = ("these compilations are forced by a tensor value read at this line; " if cause_read
              else "")
    kinds = entry.counted_kinds or entry.kinds
    if entry.varying and kinds.get("shape"):
        batch_only = all(v.dim == 0 and len(v.values) == 2 for v in entry.varying)
        if batch_only:
            return prefix + ("the last batch is smaller than the others: use "
                             "DataLoader(..., drop_last=True) or pad the last batch to the "
                             "full batch size")
        if all(v.growing for v in entry.varying):
            dims = ", ".join(f"dim {v.dim} of input {v.input}" for v in entry.varying[:3])
            return prefix + (f"{dims} grows at every compilation: a tensor is accumulated "
                             "across steps (e.g. torch.cat onto a running tensor); keep it at a "
                             "fixed size (preallocate and write by index, or keep a running sum)"
                             " so each step sees the same shapes")
        dims = ", ".join(f"dim {v.dim} of input {v.input}" for v in entry.varying[:3])
        return prefix + (f"pad {dims} to a few fixed bucket sizes instead of each batch's own "
                         "size (see `lazyscope advise RUN`)")
    if kinds.get("input_count") or kinds.get("dtype"):
        return prefix + ("the step's inputs change (a tensor enters the graph only in some "
                         "steps, or changes dtype): make the step consume the same tensors, "
                         "with the same dtypes, every step")
    if kinds.get("ir"):
        return prefix + ("the traced code path differs between steps: move Python branches on "
                         "step-dependent values out of the step, or use torch.where")
    if kinds.get("unknown"):
        return prefix + ("no input shapes were recorded for these graphs (XLA wrote no HLO dump "
                         "for them: torch_xla was started before the trace, or XLA_FLAGS has "
                         "its own --xla_dump_to filters); trace the script with `lazyscope "
                         "trace` to see which input or dimension changes")
    return prefix + ("compare the graphs' HLO (graphs/<graph hash>.hlo.txt in the run) to see "
                     "what changes")
