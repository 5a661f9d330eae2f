"""The report: everything lazyscope says about a run, computed once, typed.

``build_report(run) -> Report`` runs every analysis one time; every view (text, JSON, HTML,
plots, TensorBoard scalars, ``check``, ``diff``) is a function of the :class:`Report`. The
report is a tree of dataclasses: the JSON report is one serialisation of it
(:mod:`lazyscope.render.json`, with a JSON Schema generated from these classes), and a field
whose ``metadata`` says ``json: False`` is for the views only (numpy series, the analyses'
intermediate results). A section a run does not have is None and absent from the JSON.

Long runs stay cheap: the analyses are linear in steps and events, and the per-step series the
views draw is downsampled to at most :data:`MAX_POINTS` points (min / mean / max per bucket).
Pure: no I/O, no printing; the run is not modified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from lazyscope.analyze.anatomy import Anatomy, AnatomySection, anatomy, anatomy_steps
from lazyscope.analyze.barriers import no_barrier_findings
from lazyscope.analyze.bound import time_findings
from lazyscope.analyze.breaks import eager_fallbacks, graph_breaks
from lazyscope.analyze.buckets import Advice, advice_if_recompiling
from lazyscope.analyze.compilebill import CompileBill, compile_bill, graph_inputs, op_count
from lazyscope.analyze.events import EventGroup, event_groups, id_counts
from lazyscope.analyze.fallbacks import FallbackOp, fallback_ops
from lazyscope.analyze.findings import (
    BarrierFacts,
    Finding,
    GrowthFacts,
    RecompileFacts,
    SourceLookup,
    TimeFacts,
    _rank,
    make_findings,
)
from lazyscope.analyze.generation import with_generation
from lazyscope.analyze.memory import (
    MemorySection,
    device_memory,
    graph_rows_by_index,
    growing_memory,
    lost_aliasing,
    memory_section,
    out_of_memory,
)
from lazyscope.analyze.recompiles import SiteCompiles, explain_recompiles, library_compiles
from lazyscope.analyze.series import Series
from lazyscope.analyze.summary import Summary, summarize
from lazyscope.analyze.syncs import (
    SyncSite,
    read_price,
    read_seconds_per_step,
    sync_sites,
    syncs_per_step,
)
from lazyscope.analyze.wording import plural, say
from lazyscope.core.units import count as units_count
from lazyscope.core.units import counted, nbytes
from lazyscope.model import (
    OWNER_LIBRARY,
    Capabilities,
    Frame,
    Run,
    SourceMap,
    StepTable,
    user_site,
)

#: the JSON report's schema: raised when a key changes meaning or goes away
REPORT_SCHEMA = 2
#: points drawn or listed per step series; longer runs are bucketed
MAX_POINTS = 2000
#: rows of the compilations table
MAX_COMPILE_ROWS = 200

_VIEW = {"json": False}
_OPTIONAL = {"omit_none": True}


@dataclass
class StepRow:
    """One step of the JSON report's ``per_step`` (a run of at most MAX_POINTS steps). A field
    the backend does not measure is None."""

    step: int
    wall_s: float
    compiles: int
    compile_s: float
    executions: int | None
    execute_s: float | None
    transfers_from_device: int | None
    syncs: int
    #: where the step's time went (:mod:`lazyscope.analyze.anatomy`), where measured
    anatomy: Anatomy | None = field(default=None, metadata=_OPTIONAL)


@dataclass
class StepBucket:
    """``steps`` consecutive steps from ``step`` on (a run longer than MAX_POINTS steps)."""

    step: int
    steps: int
    wall_s: float
    wall_s_min: float
    wall_s_max: float
    compiles: int
    compile_s: float
    execute_s: float | None


@dataclass
class CompilationRow:
    """A row of the compilations table: one compilation, where and why, and how often its graph
    ran over the run (None where the backend does not record it)."""

    step: int
    seconds: float
    graph: str
    phase: str
    cause: str
    owner: str
    site: str
    executions: int | None = field(default=None, metadata=_OPTIONAL)
    #: what the graph holds on the device while it runs, in bytes (see ``memory``)
    memory_bytes: int | None = field(default=None, metadata=_OPTIONAL)
    #: its op count and inputs (where the backend recorded them: XLA's HLO dump)
    ops: int | None = field(default=None, metadata=_OPTIONAL)
    inputs: str | None = field(default=None, metadata=_OPTIONAL)


@dataclass
class RankRow:
    """One rank of a multi-process run, beside the others."""

    rank: int
    status: str
    steps: int
    compiles: int | None
    distinct_graphs: int
    median_step_s: float | None
    wall_s: float
    findings: int
    graphs_only_here: int


@dataclass
class HostRow:
    """One host of a pod (a run several hosts wrote to one URL), beside the others."""

    host: int
    status: str
    steps: int
    median_step_s: float | None
    p99_step_s: float | None
    compiles: int | None
    syncs: int | None
    distinct_graphs: int
    findings: int
    graphs_only_here: int
    #: how many processes (ranks) the host ran
    ranks: int = 1
    #: who still writes the host's part (its trace, running: ``pid 12 (vm-2), its last upload
    #: 2 s ago``); None once it ended or stopped
    written_by: str | None = field(default=None, metadata={"omit_none": True})


@dataclass
class Report:
    run_dir: str
    summary: Summary = field(metadata={"flatten": True})
    verdict: str
    clean: bool
    findings: list[Finding]
    notes: list[Finding]
    #: lines about the run: from the program (``lazyscope.note``), from the backend (what it
    #: cannot see) and from the analysis (library syncs, library compilations)
    run_notes: list[str]
    capabilities: Capabilities
    groups: list[EventGroup] = field(metadata={"name": "events"})
    compilations: list[CompilationRow]
    compilations_total: int
    per_step: list[StepRow] | list[StepBucket]
    per_step_bucketed: bool
    #: padding advice, when the run keeps compiling on a varying sequence length
    advice: Advice | None = field(default=None, metadata=_OPTIONAL)
    #: the XProf profile captured by --profile
    profile: dict[str, Any] | None = field(default=None, metadata=_OPTIONAL)
    #: a multi-process run: one row per rank, and the signs of divergence between them
    ranks: list[RankRow] | None = field(default=None, metadata=_OPTIONAL)
    divergence: list[str] | None = field(default=None, metadata=_OPTIONAL)
    #: a pod (``trace --out URL`` on several hosts): one row per host; its divergence is in
    #: ``findings`` (kind ``divergence``) and in ``divergence``
    hosts: list[HostRow] | None = field(default=None, metadata=_OPTIONAL)
    #: device memory: each compiled graph's, the peak graph, the device over the run
    memory: MemorySection | None = field(default=None, metadata=_OPTIONAL)
    #: where the steady step's time goes: input, host (tracing), compile, device, syncs
    anatomy: AnatomySection | None = field(default=None, metadata=_OPTIONAL)
    #: what compiling cost the run, by line, and the persistent compilation cache
    compile_bill: CompileBill | None = field(default=None, metadata=_OPTIONAL)
    schema_version: int = REPORT_SCHEMA
    # -- for the views only
    recompiles: list[SiteCompiles] = field(default_factory=list, metadata=_VIEW)
    syncs: list[SyncSite] = field(default_factory=list, metadata=_VIEW)
    fallbacks: list[FallbackOp] = field(default_factory=list, metadata=_VIEW)
    series: Series | None = field(default=None, metadata=_VIEW)
    steps: StepTable = field(default_factory=lambda: StepTable.empty([]), metadata=_VIEW)
    syncs_per_step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64),
                                       metadata=_VIEW)
    #: what the run recorded of its user files: notebook cells' names and the lines' text
    #: (locations read "cell In[3], line 12"; a diff follows a line that moved)
    sources: SourceMap = field(default_factory=SourceMap, metadata=_VIEW)
    #: the process's CPU and the machine's load at sampled barriers (``check --baseline``)
    host_clock: dict[str, Any] | None = field(default=None, metadata=_VIEW)
    #: how a notebook shows a report: ``{"html": ..., "text": ...}``, registered by
    #: lazyscope.render when it is imported (this layer does not import render)
    notebook_views: ClassVar[dict[str, Callable[[Report], str]]] = {}

    @property
    def backend(self) -> str:
        return self.summary.backend

    def _repr_html_(self) -> str | None:
        """Jupyter's rich display: the HTML report as a fragment (no page, scoped CSS)."""
        view = Report.notebook_views.get("html")
        return view(self) if view is not None else None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain display: the text report, not the dataclass fields."""
        view = Report.notebook_views.get("text")
        printer.text(view(self) if view is not None else f"<Report of {self.run_dir}>")


def _bucket(values: np.ndarray, size: int, how: str) -> np.ndarray:
    n = len(values)
    full = n // size * size
    parts = []
    if full:
        block = values[:full].reshape(-1, size)
        parts.append(getattr(block, how)(axis=1))
    if n > full:
        parts.append(np.array([getattr(values[full:], how)()]))
    return np.concatenate(parts) if parts else np.zeros(0)


def step_series(steps: StepTable, max_points: int = MAX_POINTS,
                time_parts: AnatomySection | None = None) -> Series:
    """The series the views draw, bucketed to at most ``max_points`` points (with the step
    anatomy's parts, when given)."""
    n = len(steps)
    wall = steps.values("wall_s")
    size = max(1, -(-n // max_points))
    starts = np.arange(0, n, size)
    sizes = np.minimum(size, n - starts)
    execute = steps.col("execute_s")
    transfer = None
    to_s, from_s = steps.col("to_device_s"), steps.col("from_device_s")
    if to_s is not None or from_s is not None:
        transfer = (to_s if to_s is not None else 0) + (from_s if from_s is not None else 0)
    cumulative = np.cumsum(wall)
    return Series(
        step=starts, size=sizes,
        wall_mean=_bucket(wall, size, "mean"), wall_min=_bucket(wall, size, "min"),
        wall_max=_bucket(wall, size, "max"),
        compiles=_bucket(steps.values("compile_count"), size, "sum"),
        compile_s=_bucket(steps.values("compile_s"), size, "sum"),
        execute_s=_bucket(execute, size, "sum") if execute is not None else None,
        transfer_s=_bucket(np.asarray(transfer, dtype=float), size, "sum")
        if transfer is not None else None,
        cumulative_s=cumulative[np.minimum(starts + sizes, n) - 1] if n else np.zeros(0),
        parts={k: _bucket(v, size, "sum") for k, v in time_parts.per_step.items()}
        if time_parts is not None else None,
        host_label=time_parts.host_label if time_parts is not None else "host",
    )


def _step_anatomy(section: AnatomySection | None, i: int) -> Anatomy | None:
    if section is None:
        return None
    parts = {k: float(v[i]) for k, v in section.per_step.items()}
    return Anatomy(wall_s=sum(parts.values()), input_s=parts["input"], host_s=parts["host"],
                   compile_s=parts["compile"], device_s=parts["device"],
                   sync_s=parts["syncs"], other_s=parts["other"])


def per_step_rows(series: Series, steps: StepTable, syncs: np.ndarray,
                  section: AnatomySection | None = None) -> list[StepRow] | list[StepBucket]:
    """The JSON report's per-step table: every step, or buckets of steps for a long run."""
    s = series
    execute = s.execute_s
    if not s.bucketed:
        transfers = steps.col("from_device_count")
        execs = steps.col("execute_count")
        return [StepRow(
            step=int(s.step[i]), wall_s=float(s.wall_mean[i]), compiles=int(s.compiles[i]),
            compile_s=float(s.compile_s[i]),
            executions=int(execs[i]) if execs is not None else None,
            execute_s=float(execute[i]) if execute is not None else None,
            transfers_from_device=int(transfers[i]) if transfers is not None else None,
            syncs=int(syncs[i]) if i < len(syncs) else 0,
            anatomy=_step_anatomy(section, i)) for i in range(len(s.step))]
    return [StepBucket(
        step=int(s.step[i]), steps=int(s.size[i]), wall_s=float(s.wall_mean[i]),
        wall_s_min=float(s.wall_min[i]), wall_s_max=float(s.wall_max[i]),
        compiles=int(s.compiles[i]), compile_s=float(s.compile_s[i]),
        execute_s=float(execute[i]) if execute is not None else None)
        for i in range(len(s.step))]


def _compilation_rows(run: Run, limit: int) -> tuple[list[CompilationRow], int]:
    ev = run.events
    idx = ev.indices("compile")
    runs: dict[int, int] = {}
    sel = ev.indices("execute")
    if len(sel):
        keys, counts = ev.key[sel].astype(np.int64), ev.value[sel]
        total = np.bincount(keys, weights=counts)
        runs = {int(k): int(round(total[k])) for k in np.flatnonzero(total)}
    rows = []
    memory = graph_rows_by_index(run)
    for i in idx[:limit]:
        e = ev.event(int(i))
        mem = memory.get(int(i))
        site = user_site(e.stack)
        data = e.data
        rows.append(CompilationRow(
            step=e.step, seconds=e.seconds, graph=e.key[:16],
            phase=getattr(data, "phase", ""), cause=getattr(data, "cause", ""),
            owner=getattr(data, "owner", ""), site=str(site) if site else "",
            executions=runs.get(int(ev.key[i]), 0) if runs and int(ev.key[i]) else None,
            memory_bytes=mem.total if mem is not None else None, ops=op_count(data),
            inputs=graph_inputs(data)))
    return rows, len(idx)


def _distinct_graphs(run: Run) -> int:
    ev = run.events
    sel = ev.indices("compile")
    keys = ev.key[sel]
    return int(len(id_counts(keys[keys != 0])[0]) + np.count_nonzero(keys == 0))



def compiles_unexplained(summary: Summary, capabilities: Capabilities) -> bool:
    """Compilations the backend counted, none recorded with its graph and cause (torch_xla
    compiled before the trace began: it writes its analysis for a process's first settings
    only): recompilation cannot be told from the events."""
    compiles = summary.compiles if summary.compiles is not None else 0
    return bool(compiles and summary.distinct_graphs == 0 and capabilities.lazy
                and "compile" in capabilities.events and not summary.eager_mode)


def verdict(backend: str, summary: Summary, capabilities: Capabilities, findings: list[Finding],
            notes: list[Finding], times: AnatomySection | None = None) -> tuple[str, bool]:
    """One line that says what matters most, and whether the run is clean: from the typed
    findings and the summary, never from a finding's sentences."""
    b = backend
    prefix = ""
    if summary.being_written_by is not None:
        prefix = f"run still being written ({summary.steps} steps so far): "
    elif not summary.complete:
        prefix = f"incomplete run ({summary.steps} finished steps): "
    elif summary.status != "ok":
        prefix = f"run {summary.status} after {summary.steps} steps: "
    recompiles = [f for f in findings if f.kind == "recompile"]
    unbarred = [f.facts for f in findings if isinstance(f.facts, BarrierFacts)]
    compiles = summary.compiles if summary.compiles is not None else 0
    unexplained = compiles_unexplained(summary, capabilities)
    if summary.idle:
        main = say(b, "verdict_idle", why=summary.idle)
    elif summary.eager_mode:
        main = say(b, "verdict_eager_mode", compiles=compiles, executions=summary.executions)
    elif unbarred:
        worst = max(unbarred, key=lambda x: x.ops or 0)
        main = say(b, "verdict_no_barrier", loop=str(worst.loop),
                   ops=units_count(worst.ops) if worst.ops is not None else "?",
                   site=str(worst.compiled_at or "?"))
        if recompiles:
            count = sum(f.count for f in recompiles)
            main += "; " + say(b, "verdict_recompiling", count=count, s=plural(count),
                               sites=len(recompiles), ss=plural(len(recompiles)),
                               what=recompiles[0].where)
    elif recompiles:
        count = sum(f.count for f in recompiles)
        first = recompiles[0].facts
        what = (first.reasons[0] if isinstance(first, RecompileFacts) and first.reasons
                else recompiles[0].where)
        main = say(b, "verdict_recompiling", count=count, s=plural(count),
                   sites=len(recompiles), ss=plural(len(recompiles)), what=what)
    elif summary.steps == 0 and not compiles:
        main = say(b, "verdict_no_steps")
    elif not compiles and not capabilities.lazy:
        main = say(b, "verdict_no_compile")
    elif unexplained:
        # counted by the backend's counters, but no compile event: nothing says whether the
        # graph is static (a trace entered after the runtime compiled, say)
        main = say(b, "verdict_unexplained", compiles=compiles, s=plural(compiles))
    elif any(n.kind == "recompile" for n in notes):
        k = sum(1 for n in notes if n.kind == "recompile")
        main = say(b, "verdict_only_notes", compiles=compiles, s=plural(compiles), notes=k,
                   ns=plural(k))
    else:
        main = say(b, "verdict_clean", compiles=compiles, s=plural(compiles))
    extras = []
    # where the step's time goes, when a part of it costs the loop: first when nothing else
    # is wrong, the largest part first
    bound = sorted((f for f in findings if isinstance(f.facts, TimeFacts)),
                   key=lambda f: -f.facts.share if isinstance(f.facts, TimeFacts) else 0)
    leads = not recompiles and not unbarred and not summary.idle and not summary.eager_mode
    syncing_sites = [f for f in findings if f.kind == "sync"]
    if times is not None and syncing_sites and times.largest()[0] == "syncs":
        # the step waits in host reads more than anywhere else: that leads
        share = f"{times.largest()[1]:.0%}"
        where = syncing_sites[0].where
        if leads and not bound:
            main = say(b, "verdict_syncs", share=share, where=where) + "; " + main
            leads = False
    for f in bound:
        assert isinstance(f.facts, TimeFacts)
        share = f"{f.facts.share:.0%}"
        if leads:
            main = say(b, f"verdict_{f.kind}", share=share) + "; " + main
            leads = False
        else:
            extras.append(say(b, f"extra_{f.kind}", share=share))
    if summary.steps == 0 and compiles and not capabilities.lazy:
        extras.append(say(b, "verdict_no_steps"))
    if summary.fallback_ops:
        n = sum(summary.fallback_ops.values())
        extras.append(say(b, "extra_fallbacks", n=n, ops=", ".join(summary.fallback_ops)))
    syncing = [f for f in findings if f.kind == "sync"]
    if syncing:
        n = sum(f.count for f in syncing)
        extras.append(say(b, "extra_syncs", n=n))
    # the kinds said by how many findings there are, in this order
    for kind, key in (("graph_break", "extra_breaks"), ("eager_fallback", "extra_eager"),
                      ("lost_aliasing", "extra_aliasing"), ("growing_memory", "extra_growing")):
        n = sum(1 for f in findings if f.kind == kind)
        if n:
            extras.append(say(b, key, n=n, s=plural(n)))
    clean = (not findings and summary.status == "ok" and summary.complete and not unexplained
             and not summary.idle)
    return prefix + main + (f"; {'; '.join(extras)}" if extras else ""), clean


def _run_notes(run: Run, syncs: list[SyncSite], findings: list[Finding],
               summary: Summary) -> list[str]:
    b = run.meta.backend
    notes = list(run.meta.program_notes) + list(run.meta.capabilities.unmeasured)
    reported = {(f.file, f.line) for f in findings if f.kind == "sync"}
    lib_syncs = [s for s in syncs if s.owner == OWNER_LIBRARY and s.site is not None and
                 (s.site.file, s.site.line) not in reported]
    if lib_syncs:
        notes.append(
            "library syncs (not findings): " + "; ".join(
                f"{counted(s.count, 'read')} by {s.library_call or 'library code'} called at "
                f"{s.site.file}:{s.site.line}" for s in lib_syncs[:3] if s.site))
    if summary.library_compiles:
        n = summary.library_compiles
        notes.append(say(b, "library_compiles", n=f"{n} graph{plural(n)}"))
    return notes


def build_report(run: Run, *, warmup_steps: int | None = None,
                 sources: SourceLookup | None = None) -> Report:
    """Every analysis of ``run``, once. ``warmup_steps`` overrides the run's warm-up (every
    compilation from that step on counts as a recompilation); ``sources`` answers what only
    the user's source says (it reads files: the caller supplies it, e.g.
    :data:`lazyscope.model.source_files.SOURCES`)."""
    if warmup_steps is not None:
        run = replace(run, meta=replace(run.meta, warmup_steps=warmup_steps))
    b = run.meta.backend
    info = run.meta.run_info
    sites = explain_recompiles(run)
    time_parts = anatomy(run.steps, run.meta.capabilities, run.meta.warmup_steps)
    syncs = sync_sites(run)
    if time_parts is not None:  # priced by what they cost the steady steps
        steady, basis = anatomy_steps(run.steps, run.meta.warmup_steps)
        reads = read_seconds_per_step(syncs, len(run.steps))
        syncs = [read_price(s, steady, time_parts.per_step["host"],
                            time_parts.per_step["syncs"], reads, basis) for s in syncs]
    fallbacks = fallback_ops(run)
    breaks = graph_breaks(run)
    eagers = eager_fallbacks(run)
    summary = summarize(run, library_compiles=library_compiles(run.events),
                        distinct_graphs=_distinct_graphs(run),
                        backward_seconds=sum(s.backward_seconds for s in sites))
    findings, notes = make_findings(
        b, sites=sites, syncs=syncs, fallbacks=fallbacks, breaks=breaks, eagers=eagers,
        steps=len(run.steps), graph_shapes=info.graph_shapes,
        wall_seconds=summary.wall_seconds, sources=sources)
    findings, notes = with_generation(b, run, findings, notes, summary.wall_seconds)
    growth_at = {(f.compiled_at.file, f.compiled_at.line): Frame(f.file, f.line, f.function)
                 for f in findings if isinstance(f.facts, RecompileFacts) and f.compiled_at
                 and f.file and any(v.growing for v in f.facts.varying)}
    # a line to change is said once: graphs that hold more each time because a recompile
    # finding's shape grows (at its line, or at its compile site) are that finding's (its
    # detail says the memory too)
    recompiling = [f for f in [*findings, *notes] if isinstance(f.facts, RecompileFacts)]
    trainer_args = (sources.call_line(_user_files(run), ["TrainingArguments"])
                    if sources is not None and _trainer_loader(info.loaders) else None)
    # a loader made before the trace began (a guard entered around the loop) has no stack:
    # the one DataLoader(...) call of the program's files is its line
    loader_line = (sources.call_line(_user_files(run), ["DataLoader"])
                   if sources is not None and _unmade_loader(info.loaders) else None)
    findings += time_findings(b, time_parts, run, trainer_args=trainer_args,
                              loader_line=loader_line)
    findings += no_barrier_findings(b, run, sources)
    growth = growing_memory(b, run, growth_at)
    owner = {id(g): next((f for f in recompiling if _same_place(f, g)), None) for g in growth}
    findings = [_with_growth(f, [g for g in growth if owner[id(g)] is f], b) for f in findings]
    findings = sorted(findings + lost_aliasing(b, run)
                      + [g for g in growth if owner[id(g)] is None], key=_rank)
    device, device_note = device_memory(info)
    text, clean = verdict(b, summary, run.meta.capabilities, findings, notes, time_parts)
    rows, total = _compilation_rows(run, MAX_COMPILE_ROWS)
    series = step_series(run.steps, time_parts=time_parts)
    per_step_syncs = syncs_per_step(run)
    return Report(
        run_dir=str(run.path), summary=summary, verdict=text, clean=clean, findings=findings,
        notes=notes, run_notes=_run_notes(run, syncs, findings, summary),
        capabilities=run.meta.capabilities, groups=event_groups(run.events),
        compilations=rows, compilations_total=total,
        per_step=per_step_rows(series, run.steps, per_step_syncs, time_parts),
        per_step_bucketed=series.bucketed,
        advice=advice_if_recompiling(run, sites),
        profile=info.profile,
        memory=memory_section(run, device, device_note, out_of_memory(run)),
        anatomy=time_parts, compile_bill=compile_bill(run),
        recompiles=sites, syncs=syncs, fallbacks=fallbacks, series=series, steps=run.steps,
        syncs_per_step=per_step_syncs, sources=info.sources, host_clock=info.host_clock,
    )


def _trainer_loader(loaders: Any) -> bool:
    """A loader made inside a library (a Trainer's own), whose settings the user sets in
    ``TrainingArguments``."""
    for rec in loaders or []:
        rows = rec.get("made_at") if isinstance(rec, dict) else None
        if rows and isinstance(rows[0], list) and len(rows[0]) == 4 and rows[0][3] and any(
                "transformers" in str(r[0]) for r in rows if isinstance(r, list) and r):
            return True
    return False


def _unmade_loader(loaders: Any) -> bool:
    """A loader the program iterated whose making the trace did not see."""
    return any(isinstance(rec, dict) and not rec.get("made_at") for rec in loaders or [])


def _user_files(run: Run) -> list[str]:
    """The user files the run's recorded frames point at."""
    files = list((run.meta.run_info.sources.lines or {}).keys())
    return files


def _same_place(recompile: Finding, growth: Finding) -> bool:
    """A growing-memory finding is a recompile finding's when both name the same line to
    change, or the same compile site."""
    a, b = recompile.compiled_at, growth.compiled_at
    return (recompile.file, recompile.line) == (growth.file, growth.line) or (
        a is not None and b is not None and (a.file, a.line) == (b.file, b.line))


def _with_growth(finding: Finding, growth: list[Finding], backend: str) -> Finding:
    """A recompile finding whose graphs also hold more each time says so itself (one finding
    for one line to change)."""
    if not growth:
        return finding
    said = [say(backend, "growth_of_shape", first=nbytes(g.facts.first_bytes),
                last=nbytes(g.facts.last_bytes), per=nbytes(g.facts.per_graph_bytes))
            for g in growth if isinstance(g.facts, GrowthFacts)]
    return replace(finding, detail="; ".join([finding.detail, *said]))
