"""A pod: one report for the hosts that wrote one run at a URL (``RUN/host<N>/``).

Each host's part is reported as a run of its own (a multi-process host through
:mod:`lazyscope.analyze.ranks`), once; the pod's report is the lowest host's, with

* ``Report.hosts``: a row per host side by side (steps, median and p99 step, compilations,
  host syncs, status; :class:`~lazyscope.analyze.report.HostRow`);
* the hosts' findings merged by (kind, line), each with the hosts it occurs on
  (``Finding.hosts``);
* divergence as findings (kind ``divergence``, first): a host that compiled graphs the others
  did not (by graph content), with what its graph changes against the closest graph of the
  others and the user line that makes it; a straggler (its median step far from the others');
  a host that stopped early (fewer steps than the others, its run not ended ``ok``: at the
  line its program raised at, else why no line can be named). On a pod any of them stalls
  every collective, or hangs it;
* a host that is not there at all (kind ``divergence``, ``missing``): the pod is expected to
  have ``--hosts N`` hosts when the user says so, else the most of what its launcher told each
  host (``TPU_WORKER_HOSTNAMES``, torchrun's node count: in their heartbeats) and the hosts the
  bucket shows (its highest host index + 1); a host of those with no part is a row of status
  ``missing`` and a finding, and the pod is ``incomplete`` (a host killed before its first
  upload, or one that never started).

A host still tracing (its heartbeat fresh: :func:`lazyscope.store.remote.heard_from`) is
``running`` with its steps so far, never stopped; the pod then reads as a run still being
written (``Summary.being_written_by`` names the hosts), as a local run a live trace holds.

Pure: no I/O beyond what the caller loaded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from lazyscope.analyze.findings import DivergenceFacts, Finding, SourceLookup
from lazyscope.analyze.ranks import build_any as build_ranked_any
from lazyscope.analyze.ranks import merge_findings, stragglers
from lazyscope.analyze.recompiles import changes_text, closest_difference
from lazyscope.analyze.report import HostRow, Report
from lazyscope.analyze.summary import timed_steps
from lazyscope.analyze.wording import plural
from lazyscope.core.units import seconds as fmt_seconds
from lazyscope.model import (
    STATUS_INTERRUPTED,
    STATUS_NO_SPACE,
    STATUS_OK,
    Compile,
    Frame,
    PodRun,
    RankedRun,
    Run,
    runs_by_rank,
    user_site,
)
from lazyscope.store.layout import ERROR_FILE


def _compiles(run: Run) -> dict[str, tuple[Compile, int, Frame | None]]:
    """``{digest: (graph, first step, where it was cut)}`` of a run's own graphs."""
    ev = run.events
    out: dict[str, tuple[Compile, int, Frame | None]] = {}
    for i in ev.indices("compile"):
        data: Compile | None = ev.payload_of(int(ev.payload[i]))
        if data is None or not data.digest or data.owner != "user" or data.digest in out:
            continue
        out[data.digest] = (data, int(ev.step[i]), user_site(ev.stack_of(int(ev.stack[i]))))
    return out


def _p99(run: Run) -> float | None:
    timed, _basis = timed_steps(run.steps, run.meta.warmup_steps)
    walls = run.steps.values("wall_s")[timed]
    walls = walls[np.isfinite(walls)]
    return float(np.percentile(walls, 99)) if len(walls) else None


def _finding(host: int, what: str, detail: str, fix: str, *, line: Frame | None = None,
             steps: list[int] | None = None, seconds: float = 0.0, **facts: Any) -> Finding:
    steps = steps or []
    return Finding("divergence", line.file if line else "", line.line if line else 0,
                   line.function if line else "", [line] if line else [], 1, steps[:1000],
                   len(steps), seconds, detail, fix,
                   DivergenceFacts(host=host, diverges=what, **facts), hosts=[host])


def error_line(part: Run | RankedRun) -> Frame | None:
    """The program's line the exception that ended a host's part raised at (its first rank
    that recorded one), None when none did."""
    for run in runs_by_rank(part).values():
        if run.meta.status != STATUS_OK:
            found = run.meta.run_info.error_frame
            if found is not None:
                return found
    return None


def _no_line(host: int, status: str) -> tuple[str, str]:
    """Why a host that stopped without an error at a line of its program has no line, and
    where to look instead: ``(why, fix)``."""
    log = f"host {host}'s own log (the trace's output on that host)"
    if status == "incomplete":
        return (f"host {host} was killed without a trace of where: its run recorded no error "
                "(SIGKILL, a preemption, the kernel's out-of-memory killer, the machine "
                "going down)",
                f"look at {log}, the kernel's log of that machine for the out-of-memory killer "
                "(`sudo dmesg`, `journalctl -k`) and the VM's preemption and maintenance "
                "events")
    if status == STATUS_INTERRUPTED:
        return (f"host {host} was stopped from outside, not by a line of its program",
                f"see what stopped it: {log}, the VM's preemption and maintenance events, "
                "whoever sent the signal")
    if status == STATUS_NO_SPACE:
        return (f"host {host}'s disk filled while its run was written",
                f"free space on host {host} (or trace to a disk with room)")
    return (f"no line of the program raised the error that ended host {host}'s run",
            f"see the error above and {log}")


def stopped_finding(host: int, steps: int, most_steps: int, status: str, error: str | None,
                    line: Frame | None) -> Finding:
    """A host that stopped at step ``steps`` of the others' ``most_steps``: at ``line`` when
    its program raised there, else with the reason no line can be named
    (``DivergenceFacts.no_line``) and where to look instead."""
    said = f"status {status}{': ' + error if error else ''}"
    head = f"host {host} stopped at step {steps} of the others' {most_steps} ({said})"
    tail = "its steps so far are kept; the other hosts' next collective waits for it"
    if line is not None:
        return _finding(
            host, "stopped", f"{head}; its program raised the error at this line; {tail}",
            f"fix the error raised at this line (host {host}'s whole traceback: the run's "
            f"host{host}/{ERROR_FILE})", line=line, steps=[steps], last_step=steps)
    why, fix = _no_line(host, status)
    return _finding(host, "stopped", f"{head}; no line can be named: {why}; {tail}", fix,
                    steps=[steps], last_step=steps, no_line=why)


def straggler_finding(host: int, median: float, others: float,
                      reports: dict[int, Report]) -> Finding:
    """A host whose median step is ``median`` against the others' ``others``: at the line of
    its own worst finding that no other host has (what it does that they do not), else with
    why no line can be named."""
    seen = {(f.kind, f.file, f.line) for h, rep in reports.items() if h != host
            for f in rep.findings}
    own = [f for f in reports[host].findings if f.file and (f.kind, f.file, f.line) not in seen]
    head = (f"host {host}'s median step is {fmt_seconds(median)}, {median / others:.2f}x the "
            f"other hosts' ({fmt_seconds(others)}): a straggler slows every collective of the "
            "pod")
    lost, ratio = (median - others) * reports[host].summary.steps, median / others
    if own:
        mine = own[0]
        return _finding(
            host, "straggler", f"{head}; only this host has its {mine.kind} finding at this "
            f"line: {mine.detail.split(';')[0]}", f"{mine.fix} (on host {host})",
            line=Frame(mine.file, mine.line, mine.function), seconds=lost, ratio=ratio)
    why = (f"host {host} is slower at every step, not at a line of the program: no finding of "
           "its run is missing from the other hosts'")
    return _finding(host, "straggler", f"{head}; no line can be named: {why}",
                    f"see what host {host} does that the others do not: its input pipeline, "
                    "a slower chip, disk or network, another job on the machine",
                    no_line=why, seconds=lost, ratio=ratio)


def expected_hosts(pod: PodRun, given: int | None = None) -> tuple[int, str] | None:
    """How many hosts ``pod`` is expected to have and who says so: ``given`` (``--hosts N``),
    else the largest of the counts its hosts' launchers declared and of the hosts the bucket
    shows (its highest host index + 1); a launcher's count first among equals. None when
    nothing says."""
    if given is not None:
        return given, "--hosts"
    options = [(n, f"{source} on host {h}") for h, (n, source) in sorted(pod.declared.items())]
    seen = pod.seen | set(pod.hosts)
    if seen:
        options.append((max(seen) + 1, f"host {max(seen)} in the bucket"))
    return max(options, key=lambda o: o[0]) if options else None


def missing_finding(host: int, expected: int, source: str, started: bool) -> Finding:
    """Host ``host`` of the ``expected`` ones (``source`` says so) has no part in the bucket;
    ``started``: it began an upload that never completed."""
    how = ("its first upload never completed" if started else
           "it uploaded nothing: it never started tracing, or it stopped before its first "
           "upload (the uploads come every LAZYSCOPE_UPLOAD_SECONDS, 5 s)")
    why = f"host {host} recorded nothing here"
    return _finding(
        host, "missing",
        f"host {host} of the {expected} expected ({source}) has no part in the bucket: {how}; "
        f"no line can be named: {why}; the other hosts' next collective waits for it (or "
        "hangs)",
        f"look at host {host}'s own log (the trace's output on that host): if its trace was "
        "killed, the next lazyscope command on that host uploads what its spool kept; if the "
        "pod has fewer hosts than that, say how many with --hosts N",
        no_line=why, expected=expected, expected_from=source)


def _missing_row(host: int) -> HostRow:
    return HostRow(host=host, status="missing", steps=0, median_step_s=None, p99_step_s=None,
                   compiles=None, syncs=None, distinct_graphs=0, findings=0,
                   graphs_only_here=0, ranks=0)


def build_pod_report(pod: PodRun, *, warmup_steps: int | None = None,
                     sources: SourceLookup | None = None, hosts: int | None = None) -> Report:
    """One report for all hosts of a pod (see the module docstring); ``hosts``: how many
    hosts to expect (``--hosts N``)."""
    reports = {h: build_ranked_any(part, warmup_steps=warmup_steps, sources=sources)
               for h, part in sorted(pod.hosts.items())}
    expected = expected_hosts(pod, hosts)
    missing = [h for h in range(expected[0]) if h not in reports] if expected else []
    leads = runs_by_rank(pod)  # each host's lowest rank
    graphs: dict[int, dict[str, tuple[Compile, int, Frame | None]]] = {}
    for h, part in pod.hosts.items():
        graphs[h] = {}
        for run in runs_by_rank(part).values():
            for digest, found in _compiles(run).items():
                graphs[h].setdefault(digest, found)
    lead_host = min(reports)
    lead = reports[lead_host]
    rows: list[HostRow] = []
    divergence: list[Finding] = []
    many = len(reports) > 1
    most_steps = max(rep.summary.steps for rep in reports.values())
    for h, rep in reports.items():
        s = rep.summary
        others = {d: g for q, gs in graphs.items() if q != h for d, g in gs.items()}
        own = {d: g for d, g in graphs[h].items() if d not in others} if many else {}
        rows.append(HostRow(
            host=h, status=s.status, steps=s.steps,
            median_step_s=s.median_step_seconds, p99_step_s=_p99(leads[h]),
            compiles=s.compiles, syncs=s.syncs, distinct_graphs=s.distinct_graphs,
            findings=len(rep.findings), graphs_only_here=len(own),
            ranks=len(rep.ranks) if rep.ranks else 1, written_by=s.being_written_by))
        if own:
            first = min(own.values(), key=lambda g: g[1])
            data, step, site = first
            line, changes = closest_difference(data, [g[0] for g in others.values()])
            what = changes_text(changes) if changes else "a graph of other content"
            n = len(own)
            divergence.append(_finding(
                h, "graphs",
                f"host {h} compiled {n} graph{plural(n)} the other hosts did not, first at step "
                f"{step}: {what}; hosts that trace different graphs wait for each other at "
                "every collective (or hang)",
                "make every host feed the same shapes at every step (pad to the same length on "
                "every host: the same bucket or max length everywhere)",
                line=line or site, steps=sorted({g[1] for g in own.values()}),
                compiled_at=site, changes=changes, graphs=n))
        if many and s.steps < most_steps and s.being_written_by is None \
                and (s.status != "ok" or not s.complete):
            divergence.append(stopped_finding(h, s.steps, most_steps, s.status, s.error,
                                              error_line(pod.hosts[h])))
    # a straggler is judged on steady steps only: a host that stopped (or is still running)
    # within its warm-up has a median of compiling steps, slow for no fault of its own
    medians = {r.host: (r.median_step_s, reports[r.host].summary.median_step_steps)
               for r in rows if reports[r.host].summary.median_step_basis == "steady"}
    divergence += [straggler_finding(h, m, mid, reports) for h, m, mid in stragglers(medians)]
    if expected is not None:
        divergence += [missing_finding(h, expected[0], expected[1], h in pod.seen)
                       for h in missing]
        rows = sorted(rows + [_missing_row(h) for h in missing], key=lambda r: r.host)
    findings = divergence + merge_findings({h: rep.findings for h, rep in reports.items()},
                                          "hosts")
    notes = merge_findings({h: rep.notes for h, rep in reports.items()}, "hosts")
    statuses = {rep.summary.status for rep in reports.values()} | (
        {"incomplete"} if missing else set())
    summary = lead.summary
    live = [r for r in rows if r.written_by is not None]
    if statuses != {"ok"}:
        worst = next((s for s in ("running", "incomplete", "no_space", "failed",
                                  "interrupted", "ok") if s in statuses), sorted(statuses)[0])
        summary = replace(summary, status=worst,
                          complete=worst not in ("incomplete", "running"),
                          being_written_by="; ".join(
                              f"host {r.host} ({r.steps} steps so far; {r.written_by})"
                              for r in live) or None)
    name = pod.name or str(pod.path)
    verdict = f"{len(reports)} host{plural(len(reports))}; host {lead_host}: {lead.verdict}"
    if missing:
        verdict = (f"{len(reports)} of {expected[0] if expected else '?'} hosts (host"
                   f"{plural(len(missing))} {', '.join(map(str, missing))} missing); host "
                   f"{lead_host}: {lead.verdict}")
    if live:
        verdict = (f"run still being written (host{plural(len(live))} "
                   f"{', '.join(str(r.host) for r in live)} running): {verdict}")
    if divergence:
        verdict += "; " + "; ".join(f.detail.split(";")[0] for f in divergence)
    run_notes = list(lead.run_notes) + [
        f"{len(reports)} hosts in {name}: the summary, steps and plots are host {lead_host}'s; "
        "see the hosts table"]
    if expected is not None:
        beyond = [h for h in reports if h >= expected[0]]
        run_notes.append(f"{expected[0]} hosts expected ({expected[1]})" + (
            f"; host{plural(len(beyond))} {', '.join(map(str, beyond))} beyond them"
            if beyond else ""))
    return replace(
        lead, run_dir=name, summary=summary, verdict=verdict,
        clean=not divergence and all(rep.clean for rep in reports.values()),
        findings=findings, notes=notes, run_notes=run_notes, hosts=rows,
        divergence=[f.detail for f in divergence] or None, ranks=None)


def build_any(target: Run | RankedRun | PodRun, *, warmup_steps: int | None = None,
              sources: SourceLookup | None = None, hosts: int | None = None) -> Report:
    """The report of a run, a multi-process run or a pod (``store.load_target``); ``hosts``:
    how many hosts a pod is expected to have (``--hosts N``)."""
    if isinstance(target, PodRun):
        return build_pod_report(target, warmup_steps=warmup_steps, sources=sources,
                                hosts=hosts)
    return build_ranked_any(target, warmup_steps=warmup_steps, sources=sources)
