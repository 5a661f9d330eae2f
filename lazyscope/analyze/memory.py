"""Device memory: what each compiled graph holds, the run's peak graph, and the findings about
memory (buffers a step cannot donate, graphs that grow step after step).

The figures are the backend's own analysis of each compiled graph (XLA: torch_xla's Post
Compilation Analysis, the executable's ``CompiledMemoryStats``), carried by each ``compile``
event (:class:`~lazyscope.model.GraphMemory`); which inputs a graph updates, donated or not,
comes from its HLO (:class:`~lazyscope.model.Update`). Pure functions of a run: no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lazyscope.analyze.findings import AliasFacts, Finding, GrowthFacts
from lazyscope.analyze.wording import plural, say
from lazyscope.core import units
from lazyscope.model import (
    OWNER_USER,
    Compile,
    Frame,
    GraphInput,
    GraphMemory,
    Run,
    Stack,
    user_site,
)
from lazyscope.model.info import RunInfo

#: a steady graph whose updated inputs are not donated, by at least this many bytes, is a
#: lost-aliasing finding (below it the buffers held twice do not matter)
MIN_LOST_BYTES = 1 << 20
#: ... and when XLA aliases less than this share of the bytes the graph updates
ALIAS_SHARE = 0.5
#: a site whose graphs grew this many times in a row (inputs or intermediates) is growing
MIN_GROWTH_GRAPHS = 3
#: ... and it compiled at least this many graphs in the second half of the run's steps (from 4
#: steps on): growth is judged over the steady steps, and a site that stopped making graphs
#: early (optimizer state made at its first step, gradient accumulation's micro-batch graphs,
#: a bucketed loader's buckets) holds what it held then
MIN_LATE_GRAPHS = 2
#: ... and by this share of what its first graph held, and at least the resolution of XLA's own
#: figures (GiB to 6 decimals, about 1 KiB): a vector one element longer a step is not memory
#: that grows
MIN_GROWTH_SHARE = 0.10
MIN_GROWTH_BYTES = 1 << 10
#: graphs listed per site in the JSON report (the largest first)
MAX_GRAPH_ROWS = 200
_OPTIONAL = {"omit_none": True}


@dataclass
class GraphBytes:
    """One compiled graph's memory, in bytes (the backend's own analysis)."""

    step: int
    graph: str
    site: str
    inputs: int
    outputs: int
    aliased: int
    intermediates: int
    program: int
    #: inputs + outputs - aliased + intermediates + program: what it holds while it runs
    total: int
    #: the inputs whose shapes differ from the other graphs compiled at the site, as this graph
    #: has them (its bucket), e.g. ``f32[8,256] (made at train.py:12)``; "" when none differ
    shape: str = ""


@dataclass
class SiteMemory:
    """The graphs compiled at one site: the largest, and how many."""

    site: str
    file: str
    line: int
    function: str
    graphs: int
    largest: GraphBytes


@dataclass
class DeviceMemory:
    """The device's memory over the run, where the runtime reports it (TPU:
    ``xm.get_memory_info``; CUDA: torch's allocator). ``None`` fields: not reported."""

    source: str
    steps: int
    #: the largest bytes in use at a step barrier, and the step
    used_max: int | None = field(default=None, metadata=_OPTIONAL)
    used_max_step: int | None = field(default=None, metadata=_OPTIONAL)
    #: the runtime's peak over the run (TPU peak_bytes_used, CUDA max_memory_allocated)
    peak: int | None = field(default=None, metadata=_OPTIONAL)
    reserved_max: int | None = field(default=None, metadata=_OPTIONAL)
    limit: int | None = field(default=None, metadata=_OPTIONAL)
    #: limit - peak, where both are known
    headroom: int | None = field(default=None, metadata=_OPTIONAL)
    #: bytes in use at each step barrier (the per-step series; downsampled past 2000 steps,
    #: each point the largest of its steps)
    used: list[int] = field(default_factory=list)
    #: each step's own peak (CUDA: ``max_memory_allocated`` since the last step's reset) and
    #: reserved bytes, where the runtime reports them; downsampled as ``used``
    step_peaks: list[int] = field(default_factory=list, metadata={"omit_empty": True})
    reserved: list[int] = field(default_factory=list, metadata={"omit_empty": True})


@dataclass
class OutOfMemory:
    """The run stopped on an out-of-memory error: the backend's words, parsed."""

    kind: str
    message: str
    #: the graph being compiled or run, where known (its site and sizes)
    graph: GraphBytes | None = field(default=None, metadata=_OPTIONAL)
    requested: int | None = field(default=None, metadata=_OPTIONAL)
    limit: int | None = field(default=None, metadata=_OPTIONAL)
    #: the largest buffers the message lists, "4.00G f32[1024,1024,1024] (param 0)"
    buffers: list[str] = field(default_factory=list)
    #: the whole one-line summary
    line: str = ""


@dataclass
class MemorySection:
    """The run's memory: per site, the peak graph, the device over the run."""

    sites: list[SiteMemory]
    graphs: list[GraphBytes]
    graphs_total: int
    peak: GraphBytes | None = field(default=None, metadata=_OPTIONAL)
    peak_at: Frame | None = field(default=None, metadata=_OPTIONAL)
    device: DeviceMemory | None = field(default=None, metadata=_OPTIONAL)
    #: why the device's memory is not reported ("not measured: ..."), when it is not
    device_note: str = field(default="", metadata={"omit_empty": True})
    out_of_memory: OutOfMemory | None = field(default=None, metadata=_OPTIONAL)


# --------------------------------------------------------------------------- the graphs


@dataclass
class _Graph:
    index: int
    step: int
    key: int
    graph: str
    stack: Stack
    data: Compile
    memory: GraphMemory


def _graphs(run: Run) -> list[_Graph]:
    """The compilations whose payload has XLA's memory analysis; each distinct payload is
    decoded once (a long run compiles the same few graphs again and again)."""
    ev = run.events
    sel = ev.indices("compile")
    if not len(sel):
        return []
    pids = ev.payload[sel]
    known: dict[int, Compile] = {}
    for pid in np.unique(pids).tolist():
        data = ev.payload_of(pid)
        if isinstance(data, Compile) and data.memory is not None:
            known[pid] = data
    if not known:
        return []
    out = []
    for i, pid in zip(sel.tolist(), pids.tolist(), strict=True):
        data = known.get(pid)
        if data is not None and data.memory is not None:
            kid = int(ev.key[i])
            out.append(_Graph(i, int(ev.step[i]), kid, ev.key_of(kid),
                              ev.stack_of(int(ev.stack[i])), data, data.memory))
    return out


def _executions(run: Run) -> dict[int, int] | None:
    ev = run.events
    sel = ev.indices("execute")
    if not len(sel):
        return None
    total = np.bincount(ev.key[sel].astype(np.int64), weights=ev.value[sel])
    return {int(k): int(round(total[k])) for k in np.flatnonzero(total)}


def _site(stack: Stack) -> Frame | None:
    return user_site(stack)


def _site_text(frame: Frame | None) -> str:
    return f"{frame.file}:{frame.line}" if frame else ""


def _array_text(i: GraphInput) -> str:
    return f"{i.dtype}[{','.join(str(d) for d in i.shape)}]"


def _bucket(g: _Graph, others: list[_Graph]) -> str:
    """The inputs of ``g`` that the closest other graph of its site (as many inputs, fewest
    different) does not have, by dtype and shape: the shapes that make this graph this
    bucket."""
    mine = g.data.inputs or []
    varying: set[tuple[str, tuple[int, ...]]] = set()
    for o in others:
        theirs = o.data.inputs or []
        if o is g or len(theirs) != len(mine):
            continue
        diff = set(Counter(i.signature() for i in mine) - Counter(i.signature() for i in theirs))
        if diff and (not varying or len(diff) < len(varying)):
            varying = diff
    parts = []
    for i in mine:
        if i.signature() in varying:
            made = f" (made at {i.origin.file}:{i.origin.line})" if i.origin else ""
            parts.append(_array_text(i) + made)
    return ", ".join(dict.fromkeys(parts))


def _bytes_row(g: _Graph, others: list[_Graph]) -> GraphBytes:
    m = g.memory
    return GraphBytes(step=g.step, graph=g.graph[:16], site=_site_text(_site(g.stack)),
                      inputs=m.inputs, outputs=m.outputs, aliased=m.aliased,
                      intermediates=m.intermediates, program=m.program, total=m.total,
                      shape=_bucket(g, others))


def memory_section(run: Run, device: DeviceMemory | None = None, device_note: str = "",
                   out_of_memory: OutOfMemory | None = None) -> MemorySection | None:
    """The run's memory section; None when no graph had an analysis and nothing else is
    known (a backend that does not report memory)."""
    graphs = _graphs(run)
    if not graphs and device is None and out_of_memory is None:
        return None
    by_site: dict[tuple[str, int], list[_Graph]] = {}
    for g in graphs:
        site = _site(g.stack)
        by_site.setdefault((site.file, site.line) if site else ("", 0), []).append(g)
    sites = []
    for group in by_site.values():
        largest = max(group, key=lambda g: (g.memory.total, -g.index))
        frame = _site(largest.stack)
        sites.append(SiteMemory(site=_site_text(frame), file=frame.file if frame else "",
                                line=frame.line if frame else 0,
                                function=frame.function if frame else "",
                                graphs=len(group), largest=_bytes_row(largest, group)))
    sites.sort(key=lambda s: -s.largest.total)
    peak = sites[0].largest if sites else None
    peak_at = None
    if sites:
        s = sites[0]
        peak_at = Frame(s.file, s.line, s.function) if s.file else None
    rows = [_bytes_row(g, by_site[_key(g)]) for g in graphs[:MAX_GRAPH_ROWS]]
    return MemorySection(sites=sites, graphs=rows, graphs_total=len(graphs), peak=peak,
                         peak_at=peak_at, device=device, device_note=device_note,
                         out_of_memory=out_of_memory)


def _key(g: _Graph) -> tuple[str, int]:
    site = _site(g.stack)
    return (site.file, site.line) if site else ("", 0)


def user_graph_bytes(run: Run) -> list[tuple[int, str, str, int]]:
    """``(step, graph id, site, total bytes)`` of the user's compiled graphs whose backend
    analysed their memory, in compile order."""
    return [(g.step, g.graph, _site_text(_site(g.stack)), g.memory.total) for g in _graphs(run)
            if g.data.owner == OWNER_USER]


def graph_rows_by_index(run: Run) -> dict[int, GraphMemory]:
    """``{compile event index: memory}``, for the compilations table."""
    return {g.index: g.memory for g in _graphs(run)}


# --------------------------------------------------------------------------- findings


def _steady(graphs: list[_Graph], runs: dict[int, int] | None) -> list[_Graph]:
    """The graphs of the steady step: run at least twice (where executions are recorded), else
    compiled after the first step (the first steps create the optimizer's state)."""
    if runs is not None:
        return [g for g in graphs if runs.get(g.key, 0) >= 2]
    return [g for g in graphs if g.step >= 1]


def lost_aliasing(backend: str, run: Run) -> list[Finding]:
    """A steady graph that computes new values of its inputs (parameters, optimizer state)
    without donating their buffers (XLA aliases far less than the bytes it updates): one
    finding per user line that computes the new values out of place."""
    graphs = _steady(_graphs(run), _executions(run))
    by_line: dict[tuple[str, int], dict[str, Any]] = {}
    seen: set[str] = set()
    for g in graphs:
        if g.graph in seen or not g.data.updates:
            continue
        seen.add(g.graph)
        updated = sum(u.nbytes for u in g.data.updates)
        lost = [u for u in g.data.updates if not u.donated]
        lost_bytes = sum(u.nbytes for u in lost)
        if lost_bytes < MIN_LOST_BYTES or g.memory.aliased >= ALIAS_SHARE * updated:
            continue
        for u in lost:
            where = u.at or _site(g.stack)
            key = (where.file, where.line) if where else ("", 0)
            entry = by_line.setdefault(key, {"at": where, "graph": g, "updates": [],
                                             "updated": updated})
            entry["updates"].append(u)
    findings = []
    for (file, line), entry in by_line.items():
        graph: _Graph = entry["graph"]
        ups = entry["updates"]
        lost_bytes = sum(u.nbytes for u in ups)
        arrays = ", ".join(f"{u.dtype}[{','.join(map(str, u.shape))}]" for u in ups[:4])
        at: Frame | None = entry["at"]
        facts = AliasFacts(graph=graph.graph[:16], compiled_at=_site(graph.stack),
                           updated_bytes=entry["updated"], lost_bytes=lost_bytes,
                           aliased_bytes=graph.memory.aliased,
                           outputs_bytes=graph.memory.outputs,
                           inputs=[u.input for u in ups], arrays=arrays)
        detail = say(backend, "alias_detail", n=len(ups), s=plural(len(ups)), arrays=arrays,
                     lost=units.nbytes(lost_bytes), aliased=units.nbytes(graph.memory.aliased),
                     updated=units.nbytes(entry["updated"]),
                     site=_site_text(_site(graph.stack)),
                     outputs=units.nbytes(graph.memory.outputs))
        steps = sorted({graph.step})
        findings.append(Finding(
            kind="lost_aliasing", file=file, line=line,
            function=at.function if at else "", stack=[at] if at else [], count=len(ups),
            steps=steps, step_count=len(steps), seconds=0.0, detail=detail,
            fix=say(backend, "alias_fix"), facts=facts))
    return findings


def growing_memory(backend: str, run: Run, growth_at: dict[tuple[str, int], Frame]
                   ) -> list[Finding]:
    """A site whose graphs' inputs or intermediates rose graph after graph, at least
    :data:`MIN_GROWTH_GRAPHS` times in a row up to its last graph: tensors kept across steps.
    Growth is judged over the steady steps: a site that compiled fewer than
    :data:`MIN_LATE_GRAPHS` graphs in the run's second half stopped growing (a bounded set of
    variants made early, each reused since), so what stays live is flat.
    ``growth_at``: the line where a site's growing input grows, where the recompile analysis
    found it (``torch.cat`` of a kept tensor). A growth at the line of a recompile finding is
    that finding's (:func:`lazyscope.analyze.report.build_report` says it there)."""
    by_site: dict[tuple[str, int], list[_Graph]] = {}
    for g in _graphs(run):
        by_site.setdefault(_key(g), []).append(g)
    findings = []
    n = len(run.steps)
    for key, group in by_site.items():
        group.sort(key=lambda g: g.index)
        held = [g.memory.inputs + g.memory.intermediates for g in group]
        rises = 0
        for a, b in zip(held[-2::-1], held[:0:-1], strict=True):  # from the end backwards
            if b > a:
                rises += 1
            else:
                break
        if rises < MIN_GROWTH_GRAPHS:
            continue
        grown = held[-1] - held[-rises - 1]
        if grown < max(MIN_GROWTH_BYTES, MIN_GROWTH_SHARE * held[-rises - 1]):
            continue
        first, last = group[-rises - 1], group[-1]
        if n >= 4 and sum(1 for g in group if g.step >= n // 2) < MIN_LATE_GRAPHS:
            continue  # it stopped making graphs early: what stays live is flat since
        site = _site(last.stack)
        at = growth_at.get(key) or _new_input_origin(group[-2], last) or site
        per = (held[-1] - held[-rises - 1]) / rises
        facts = GrowthFacts(compiled_at=site, graphs=rises + 1,
                            first_bytes=held[-rises - 1], last_bytes=held[-1],
                            per_graph_bytes=int(per), compiled_steps=[g.step for g in group[-rises - 1:]])
        detail = say(backend, "growth_detail", n=rises + 1, first=units.nbytes(held[-rises - 1]),
                     last=units.nbytes(held[-1]), per=units.nbytes(per),
                     site=_site_text(site), a=first.step, b=last.step)
        steps = [g.step for g in group[-rises - 1:]]
        findings.append(Finding(
            kind="growing_memory", file=at.file if at else "", line=at.line if at else 0,
            function=at.function if at else "", stack=[at] if at else [], count=rises,
            steps=steps, step_count=len(steps), seconds=0.0, detail=detail,
            fix=say(backend, "growth_fix"), facts=facts))
    return findings


def _new_input_origin(before: _Graph, after: _Graph) -> Frame | None:
    """The most common origin of the inputs ``after`` has and ``before`` has not (or whose
    shape grew)."""
    old = Counter(i.signature() for i in before.data.inputs or [])
    origins: Counter[tuple[str, int]] = Counter()
    for i in after.data.inputs or []:
        if old[i.signature()] > 0:
            old[i.signature()] -= 1
        elif i.origin is not None:
            origins[(i.origin.file, i.origin.line)] += 1
    if not origins:
        return None
    (file, line), _ = origins.most_common(1)[0]
    return Frame(file, line)


# --------------------------------------------------------------------------- the device


#: points of the per-step series kept in the report
MAX_DEVICE_POINTS = 2000


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def device_memory(info: RunInfo) -> tuple[DeviceMemory | None, str]:
    """The device's memory over the run from the run's info (``device_memory``: what the
    collector read at each barrier), or why it is not reported."""
    data = info.device_memory
    if data is None:
        return None, ""
    why = data.get("unmeasured")
    if isinstance(why, str) and why:
        return None, f"{units.NOT_MEASURED}: {why}"
    used_raw = data.get("used")
    used = [u for u in (_int(v) for v in used_raw) if u is not None] \
        if isinstance(used_raw, list) else []
    reserved_raw = data.get("reserved")
    reserved = [r for r in (_int(v) for v in reserved_raw) if r is not None] \
        if isinstance(reserved_raw, list) else []
    peaks_raw = data.get("step_peaks")
    peaks = [p for p in (_int(v) for v in peaks_raw) if p is not None] \
        if isinstance(peaks_raw, list) else []
    peak, limit = _int(data.get("peak")), _int(data.get("limit"))
    if peak is None and peaks:
        peak = max(peaks)
    top = int(np.argmax(used)) if used else None
    steps = max(len(used), len(peaks), len(reserved))
    size = max(1, -(-steps // MAX_DEVICE_POINTS))

    def down(values: list[int]) -> list[int]:
        return [max(values[i:i + size]) for i in range(0, len(values), size)]

    return DeviceMemory(
        source=str(data.get("source", "")), steps=steps,
        used_max=used[top] if top is not None else None, used_max_step=top,
        peak=peak, reserved_max=max(reserved) if reserved else None, limit=limit,
        headroom=limit - peak if limit is not None and peak is not None else None,
        used=down(used), step_peaks=down(peaks), reserved=down(reserved)), ""


def out_of_memory(run: Run) -> OutOfMemory | None:
    """The out-of-memory error the run stopped on (recorded by the runner), with the graph it
    happened in: the last graph compiled at the error's line, else the last compiled."""
    from lazyscope.core.oom import OutOfMemoryText

    data = run.meta.run_info.out_of_memory
    oom = OutOfMemoryText.from_json(data)
    if oom is None or data is None:
        return None
    site = data.get("site")
    graphs = _graphs(run)
    chosen = None
    if isinstance(site, list) and len(site) == 2:
        at = [g for g in graphs if _key(g) == (str(site[0]), site[1])]
        chosen = at[-1] if at else None
    if chosen is None and graphs:
        chosen = graphs[-1]
    row = _bytes_row(chosen, [g for g in graphs if _key(g) == _key(chosen)]) if chosen else None
    return OutOfMemory(kind=oom.kind, message=str(data.get("message", "")), graph=row,
                       requested=oom.needed, limit=oom.limit,
                       buffers=[b.text(units.nbytes) for b in oom.buffers],
                       line=oom_line(oom, row, site))


def oom_line(oom: Any, graph: GraphBytes | None, site: Any) -> str:
    """One line: where, the graph's sizes, the message's sizes and largest buffers."""
    from lazyscope.core.oom import one_line

    where = f"{site[0]}:{site[1]}" if isinstance(site, list) and len(site) == 2 else ""
    sizes = None if graph is None else {
        "inputs": graph.inputs, "outputs": graph.outputs, "aliased": graph.aliased,
        "intermediates": graph.intermediates, "program": graph.program}
    return one_line(oom, units.nbytes, where, graph.site if graph else "",
                    graph.step if graph else None, sizes)


# --------------------------------------------------------------------------- padded lengths


@dataclass(frozen=True)
class MemoryModel:
    """A graph's bytes against the padded length ``L`` of the varying dimension and the rows
    of its batch, fitted on the run's own compiled graphs of the step site (the backend's
    analysis of each): ``fixed + rows/self.rows * (linear*L + quadratic*L^2)``; at a length
    and row count the run compiled, the measured bytes themselves.

    ``form``: ``quadratic`` (three or more lengths: least squares), ``linear`` (two, or a
    quadratic term that came out negative), ``proportional`` (one length: bytes scale with
    ``L`` x rows, the fixed part, parameters and optimizer state, unknown and scaled too)."""

    form: str
    fixed: float = field(metadata={"round": 1})
    linear: float = field(metadata={"round": 3})
    quadratic: float = field(metadata={"round": 6})
    #: the rows (batch) the measured graphs had
    rows: int
    #: the lengths measured, and each one's largest graph (bytes), ascending
    lengths: tuple[int, ...]
    graph_bytes: tuple[int, ...]
    #: the site the graphs were compiled at (``file:line``)
    site: str = ""

    def bytes_at(self, length: int, rows: int | None = None) -> int:
        """The largest graph's bytes for batches of ``rows`` rows padded to ``length``."""
        rows = self.rows if rows is None else rows
        if rows == self.rows and length in self.lengths:
            return self.graph_bytes[self.lengths.index(length)]
        per_row = self.linear * length + self.quadratic * length * length
        return max(0, int(round(self.fixed + per_row * rows / max(1, self.rows))))

    JSON_EXTRA: ClassVar[dict[str, str]] = {"how": "how"}

    @property
    def how(self) -> str:
        """How the model was estimated, in words."""
        pts = ", ".join(f"{n}: {units.nbytes(b)}" for n, b in zip(self.lengths, self.graph_bytes,
                                                                    strict=True))
        at = f" at {self.site}" if self.site else ""
        if self.form == "proportional":
            return (f"proportional to L x rows from the one length the run compiled{at} "
                    f"({pts}, {self.rows} rows): the fixed part (parameters, optimizer state) "
                    "is unknown and scaled with it, an overestimate for longer rows")
        terms = f"{units.nbytes(self.fixed)} + {self.linear:,.0f} B x L" + (
            f" + {self.quadratic:,.2f} B x L^2" if self.form == "quadratic" else "")
        return (f"fit {terms} per {self.rows} rows over the {len(self.lengths)} lengths the run "
                f"compiled{at} ({pts})")


def fit_memory(points: dict[int, int], rows: int, site: str = "") -> MemoryModel | None:
    """The :class:`MemoryModel` of ``{padded length: largest graph bytes}`` measured at
    ``rows`` rows; None without a point."""
    pts = sorted((int(k), int(v)) for k, v in points.items() if k > 0 and v > 0)
    if not pts:
        return None
    lengths = tuple(k for k, _ in pts)
    values = tuple(v for _, v in pts)

    def model(form: str, a: float, b: float, c: float) -> MemoryModel:
        return MemoryModel(form, a, b, c, max(1, rows), lengths, values, site)

    x = np.array(lengths, dtype=float)
    y = np.array(values, dtype=float)
    scale = float(x.max())
    if len(pts) >= 3:
        a, b, c = np.linalg.lstsq(np.vander(x / scale, 3, increasing=True), y, rcond=None)[0]
        if c >= 0:  # convex: never bends down past the longest length measured
            return model("quadratic", float(a), float(b / scale), float(c / scale / scale))
    if len(pts) >= 2:
        a, b = np.linalg.lstsq(np.vander(x / scale, 2, increasing=True), y, rcond=None)[0]
        if b > 0:
            return model("linear", float(a), float(b / scale), 0.0)
    top_len, top_bytes = max(pts, key=lambda p: p[1])
    return model("proportional", 0.0, top_bytes / top_len, 0.0)
