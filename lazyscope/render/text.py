"""The text report: header, totals, a per-step table, events, findings, notes, and the verdict
as the last line. A pure function of the :class:`~lazyscope.analyze.report.Report`; a total the
backend does not measure reads "not measured", never 0."""

from __future__ import annotations

from lazyscope.analyze.anatomy import PARTS, AnatomySection, anatomy_line
from lazyscope.analyze.compilebill import bill_lines
from lazyscope.analyze.findings import AliasFacts, DivergenceFacts, Finding, GrowthFacts
from lazyscope.analyze.report import HostRow, RankRow, Report
from lazyscope.analyze.wording import plural
from lazyscope.core.units import NOT_MEASURED, counted, nbytes
from lazyscope.core.units import seconds as fmt_seconds
from lazyscope.model import Frame, SourceMap, Step, location

MAX_TABLE_ROWS = 40
MAX_GROUPS = 40
__all__ = ["NOT_MEASURED", "finding_lines", "render_findings_text", "render_summary_text", "render_text"]


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


#: the anatomy's columns in the step table (compile has its own column already)
_TIME_COLUMNS = [p for p in PARTS if p != "compile"]


def _step_row(s: Step, times: AnatomySection | None) -> str:
    compile_s = fmt_seconds(s.compile_s) if s.compile_count else "-"
    row = (f"  {s.index:>5} {fmt_seconds(s.wall_s):>10} {_n(s.compile_count):>8} "
           f"{compile_s:>10} {_n(s.execute_count):>5} {_n(s.to_device_count):>6} "
           f"{_n(s.from_device_count):>8} {_n(s.fallback_count):>9}")
    if times is not None:
        row += " " + " ".join(
            f"{fmt_seconds(float(times.per_step[p][s.index])) if p in times.measured else '-':>9}"
            for p in _TIME_COLUMNS)
    return row


def _step_rows(report: Report) -> list[str]:
    steps = report.steps
    times = report.anatomy
    n = len(steps)
    head = (f"  {'step':>5} {'wall':>10} {'compiles':>8} {'compile':>10} {'execs':>5} "
            f"{'to dev':>6} {'from dev':>8} {'fallbacks':>9}")
    if times is not None:
        head += " " + " ".join(f"{times.label(p):>9}" for p in _TIME_COLUMNS)
    rows = [head]
    if n <= MAX_TABLE_ROWS:
        return rows + [_step_row(steps[i], times) for i in range(n)]
    half = MAX_TABLE_ROWS // 2
    return (rows + [_step_row(steps[i], times) for i in range(half)] + [f"  {'...':>5}"]
            + [_step_row(steps[i], times) for i in range(n - half, n)])


def time_line(times: AnatomySection) -> str:
    """``step time      180 ms mean of 27 steady steps: input 44% · tracing 31% ...``"""
    which = ("steady steps" if times.basis == "steady" else "steps")
    return (f"  step time       {fmt_seconds(times.steady.wall_s)} (mean of {times.steps} "
            f"{which}): {anatomy_line(times)}")


def render_summary_text(report: Report) -> list[str]:
    """The header and totals block."""
    s = report.summary
    target = s.target + (" " + " ".join(s.args) if s.args else "")
    versions = ", ".join(f"{k} {v}" for k, v in s.versions.items())
    status = s.status + (f": {s.error}" if s.error else "")
    lines = [f"run still being written by {s.being_written_by}: the report so far"] \
        if s.being_written_by is not None else []
    lines += [
        f"lazyscope report: {report.run_dir}",
        f"  target      {s.target_kind} {target}",
        f"  backend     {s.backend} on {s.device or '?'} ({versions})",
        f"  status      {status}",
    ]
    lines += [f"  warning     {w}" for w in s.warnings]
    lines += [f"  note        {n}" for n in report.run_notes]
    if s.warmup_steps is not None:
        steps_line = f"{s.steps} (the first {s.warmup_steps} are warm-up: --warmup-steps)"
    else:
        steps_line = f"{s.steps} ({s.steady_steps} compiled nothing)"
    graphs = ("op by op (eager mode): no graphs" if s.eager_mode
              else counted(s.distinct_graphs, "distinct graph"))
    comp = "not measured" if s.compiles is None else (
        f"{s.compiles} ({graphs}), {fmt_seconds(s.compile_seconds)}"
        + (f" (backward {fmt_seconds(s.backward_compile_seconds)})"
           if s.backward_compile_seconds else ""))
    lines += [
        "",
        f"  steps           {steps_line}",
        f"  median step     {fmt_seconds(s.median_step_seconds)}"
        + (f" (median of the {s.median_step_steps} steady steps)" if s.median_step_basis ==
           "steady" and s.median_step_steps < s.steps else
           f" (median of all {s.median_step_steps} steps)" if s.steps else ""),
    ]
    if report.anatomy is not None:
        lines.append(time_line(report.anatomy))
    lines += [
        f"  wall            {fmt_seconds(s.wall_seconds)}",
        f"  compilations    {comp}",
    ]
    if report.compile_bill is not None:
        head = "  compile bill    "
        lines += [head + text if i == 0 else " " * len(head) + text
                  for i, text in enumerate(bill_lines(report.compile_bill))]
    if s.real_tokens is not None:
        eff = (f", padding efficiency {s.padding_efficiency:.2f}"
               if s.padding_efficiency is not None else "")
        rate = (f", {s.real_tokens_per_second:,.0f}/s (compiles included)"
                if s.real_tokens_per_second is not None else "")
        lines.append(f"  real tokens     {s.real_tokens:,}{eff}{rate}; counted from "
                     f"{s.tokens_counted_by}")
    if s.executions is not None:
        lines.append(f"  executions      {s.executions}, {fmt_seconds(s.execute_seconds)}")
    if s.transfers_to_device is not None:
        lines.append(f"  to device       {s.transfers_to_device} transfers, "
                     f"{nbytes(s.bytes_to_device or 0)}")
    if s.transfers_from_device is not None:
        lines.append(f"  from device     {s.transfers_from_device} transfers, "
                     f"{nbytes(s.bytes_from_device or 0)}, "
                     f"{fmt_seconds(s.transfer_from_device_seconds)}")
    lines.append(f"  host syncs      {NOT_MEASURED if s.syncs is None else s.syncs}")
    runtime = s.runtime_counts
    if runtime:  # the runtime's own counters over the same run, to check the counts above by
        lines.append("  runtime counts  " + ", ".join(f"{k} {v}" for k, v in runtime.items()))
    if "fallback_exec" in report.capabilities.events:
        fb = s.fallback_ops
        lines.append("  CPU fallbacks   " + (", ".join(f"{op} x{n}" for op, n in fb.items())
                                             if fb else "none"))
    if "graph_break" in report.capabilities.events or s.graph_breaks:
        lines.append(f"  graph breaks    {s.graph_breaks}")
    return lines


def _event_rows(report: Report) -> list[str]:
    if not report.groups:
        return []
    sources = report.sources
    rows = ["", "  events (kind x count at site: cause; steps)"]
    for g in report.groups[:MAX_GROUPS]:
        steps = ",".join(str(s) for s in g.steps) + (",..." if g.count > len(g.steps) else "")
        kind = f"{g.kind} ({g.phase})" if g.phase == "backward" else g.kind
        site = g.site if g.frame is None else \
            location(g.frame, sources) + (f" ({g.frame.function})" if g.frame.function else "")
        rows.append(f"  {kind:<18} x{g.count:<4} at {site}: {g.cause} (steps {steps})")
    if len(report.groups) > MAX_GROUPS:
        rows.append(f"  ... {len(report.groups) - MAX_GROUPS} more groups (lazyscope report "
                    "--format json)")
    return rows


def finding_cost(f: Finding) -> str:
    """What a finding's header says it costs: ``x27, ~3.26 s`` (how often, the time it cost);
    a memory finding its bytes (``4.0 MiB held twice``, ``1.0 MiB -> 9.0 MiB over 5 graphs``);
    a finding that costs no time of its own (a host missing, stopped) nothing."""
    facts = f.facts
    if isinstance(facts, AliasFacts):
        return f"{nbytes(facts.lost_bytes)} held twice ({counted(f.count, 'array')})"
    if isinstance(facts, GrowthFacts):
        return (f"{nbytes(facts.first_bytes)} -> {nbytes(facts.last_bytes)} over "
                f"{facts.graphs} graphs")
    if not f.seconds and isinstance(facts, DivergenceFacts):
        return ""
    return f"x{f.count}, ~{fmt_seconds(f.seconds)}"


def _finding_lines(i: int, f: Finding, sources: SourceMap) -> list[str]:
    where = location(Frame(f.file, f.line), sources) if f.file else f.where
    cost = finding_cost(f)
    lines = [f"  {i}. [{f.kind}] {where}" + (f" {cost}" if cost.startswith("x") else
                                             f", {cost}" if cost else "")]
    if f.compiled_at is not None and (f.compiled_at.file, f.compiled_at.line) != (f.file, f.line):
        at = f.compiled_at
        lines.append(f"     compiled at {location(at, sources)}"
                     + (f" ({at.function})" if at.function else ""))
    callers = [fr for fr in f.stack[1:4]]
    if callers:
        lines.append("     called from " + " <- ".join(location(fr, sources) for fr in callers))
    lines.append(f"     {f.detail}" + (f" (on ranks {', '.join(map(str, f.ranks))})"
                                        if f.ranks and f.ranks != [0] else "")
                 + (f" (on host{plural(len(f.hosts))} {', '.join(map(str, f.hosts))})"
                    if f.hosts is not None and f.kind != "divergence" else ""))
    lines.append(f"     fix: {f.fix}")
    return lines


def finding_lines(f: Finding, sources: SourceMap, number: int = 1) -> list[str]:
    """One finding as the report shows it (its line, detail and fix), numbered ``number``."""
    return _finding_lines(number, f, sources)


def render_findings_text(report: Report) -> list[str]:
    """Findings ranked by estimated time, each with its fix; then the notes."""
    lines: list[str] = []
    sources = report.sources  # notebook cells: "cell In[3], line 12"
    if not report.findings:
        lines += ["", "findings: none"]
    else:
        lines += ["", f"findings ({len(report.findings)}, most expensive first):"]
        for i, f in enumerate(report.findings, start=1):
            lines += _finding_lines(i, f, sources)
    if report.notes:
        lines += ["", f"notes ({len(report.notes)}: worth knowing, not findings):"]
        for i, f in enumerate(report.notes, start=1):
            lines += _finding_lines(i, f, sources)
    return lines


def _advice_lines(report: Report) -> list[str]:
    advice = report.advice
    if advice is None:
        return []
    best = advice.recommended
    alt = advice.best_without_model_change
    return [
        "",
        f"padding advice: the padded sequence length took {advice.seq_len_values} values; "
        f"over {advice.horizon:,} steps {best.name} is predicted fastest "
        f"({best.tokens_per_s:,.0f} real tokens/s, padding efficiency "
        f"{best.padding_efficiency:.2f})"
        + (f"; without changing the model: {alt.name}" if alt is not None and alt is not best
           else "")
        + f" (lazyscope advise {report.run_dir} for the table, --emit for the code)",
    ]


def memory_lines(report: Report) -> list[str]:
    """Each site's largest graph in bytes, the peak graph and its shape, the device over the
    run (or why not), and the out-of-memory error the run stopped on."""
    mem = report.memory
    if mem is None:
        return []
    sources = report.sources
    lines = ["", "  memory per compiled graph, bytes (the backend's own analysis; the largest "
                 "graph of each site)",
             f"  {'graphs':>6} {'total':>14} {'inputs':>14} {'outputs':>14} {'aliased':>14} "
             f"{'intermediates':>14} {'program':>10}  site"]
    for site in mem.sites[:MAX_GROUPS]:
        g = site.largest
        where = location(Frame(site.file, site.line), sources) if site.file else "?"
        lines.append(f"  {site.graphs:>6} {g.total:>14,} {g.inputs:>14,} {g.outputs:>14,} "
                     f"{g.aliased:>14,} {g.intermediates:>14,} {g.program:>10,}  {where}"
                     + (f" ({site.function})" if site.function else ""))
    if mem.peak is not None:
        at = location(mem.peak_at, sources) if mem.peak_at else "an unknown line"
        shape = f", its inputs {mem.peak.shape}" if mem.peak.shape else ""
        lines.append(f"  peak graph      {nbytes(mem.peak.total)} ({mem.peak.total:,} B), "
                     f"compiled at {at} at step {mem.peak.step}{shape}")
    dev = mem.device
    if dev is not None:
        parts = [f"{dev.source}:"]
        if dev.used_max is not None:
            parts.append(f"in use at most {nbytes(dev.used_max)} (step {dev.used_max_step})")
        if dev.peak is not None:
            parts.append(f"peak {nbytes(dev.peak)}")
        if dev.reserved_max is not None:
            parts.append(f"reserved at most {nbytes(dev.reserved_max)}")
        if dev.limit is not None:
            parts.append(f"of {nbytes(dev.limit)}")
        if dev.headroom is not None:
            parts.append(f"(headroom {nbytes(dev.headroom)})")
        lines.append("  device memory   " + " ".join(parts))
    elif mem.device_note:
        lines.append(f"  device memory   {mem.device_note}")
    if mem.out_of_memory is not None:
        lines.append(f"  out of memory   {mem.out_of_memory.line}")
    return lines


def render_text(report: Report) -> str:
    lines = render_summary_text(report)
    if len(report.steps):
        lines += ["", *_step_rows(report)]
    lines += _event_rows(report)
    lines += memory_lines(report)
    lines += render_findings_text(report)
    lines += _advice_lines(report)
    if report.ranks:
        lines += ["", *_rank_lines(report.ranks, report.divergence or [])]
    if report.hosts:
        lines += ["", *_host_lines(report.hosts)]
    lines += ["", f"verdict: {report.verdict}"]
    return "\n".join(lines) + "\n"


def _host_lines(rows: list[HostRow]) -> list[str]:
    """The pod's hosts side by side (their divergence is among the findings)."""
    status = {r.host: f"running, {r.steps} steps so far" if r.written_by is not None
              else r.status for r in rows}
    w = max(10, *(len(v) for v in status.values()))
    lines = [f"hosts ({len(rows)}):",
             f"  {'host':>4} {'status':<{w}} {'steps':>6} {'median step':>11} {'p99 step':>9} "
             f"{'compiles':>8} {'syncs':>6} {'findings':>8} {'own graphs':>10}"]
    for r in rows:
        median = "-" if r.median_step_s is None else fmt_seconds(r.median_step_s)
        p99 = "-" if r.p99_step_s is None else fmt_seconds(r.p99_step_s)
        lines.append(f"  {r.host:>4} {status[r.host]:<{w}} {r.steps:>6} {median:>11} {p99:>9} "
                     f"{r.compiles if r.compiles is not None else '-':>8} "
                     f"{r.syncs if r.syncs is not None else '-':>6} {r.findings:>8} "
                     f"{r.graphs_only_here:>10}")
    return lines


def _rank_lines(rows: list[RankRow], divergence: list[str]) -> list[str]:
    lines = [f"ranks ({len(rows)}):",
             f"  {'rank':>4} {'status':<10} {'steps':>6} {'compiles':>8} {'graphs':>6} "
             f"{'median step':>11} {'wall':>9} {'findings':>8} {'own graphs':>10}"]
    for r in rows:
        median = "-" if r.median_step_s is None else fmt_seconds(r.median_step_s)
        lines.append(f"  {r.rank:>4} {r.status:<10} {r.steps:>6} "
                     f"{r.compiles if r.compiles is not None else '-':>8} "
                     f"{r.distinct_graphs:>6} {median:>11} "
                     f"{fmt_seconds(r.wall_s):>9} {r.findings:>8} {r.graphs_only_here:>10}")
    lines += [f"  divergence: {d}" for d in divergence]
    return lines
