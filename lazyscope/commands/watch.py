"""``lazyscope watch RUN``: follow a run another process is writing (``lazyscope trace --out
RUN`` in another terminal): its live counts and the same alerts as the trace prints, until the
trace ends; then the final verdict.

What it reads goes through :func:`lazyscope.store.follow.follow`: a local run directory, or one
host's part of a run at a URL (a consistent copy of its last whole upload, see
:func:`lazyscope.store.remote.download`). Each poll (every ``POLL_S``) reads who writes the run (its lock) and then the run so far; the
steps not seen before go through the live alerts' own rule (:meth:`lazyscope.integrations.live.OnlineCheck
.after_steps`: the same triggers, the same report and findings as ``lazyscope report``), so
what is said while it runs is a finding of the final report. It writes nothing anywhere: Ctrl-C
stops watching (exit 130) and leaves the run alone. It exits 0 when the run ended ok, else 5
(``EXIT_TARGET_FAILED``: failed, interrupted, or killed without finalising it), having said its
error and the line it was raised at.

On a terminal the counts are the trace's own live line (:class:`~lazyscope.commands.console
.TraceProgress`), the alerts printed above it; otherwise plain lines: one per alert, and a
progress line at most every ``--every`` seconds when steps were added.
"""

from __future__ import annotations

import math
import time
from typing import Any

import click
import numpy as np

from lazyscope.analyze.report import build_report
from lazyscope.commands.common import CONTEXT, Real, Whole
from lazyscope.commands.console import TraceProgress, live_wanted, progress_parts
from lazyscope.core import streams
from lazyscope.core.errors import EXIT_OK, EXIT_TARGET_FAILED, RunDirError, one_line
from lazyscope.core.numbers import MAX_SECONDS
from lazyscope.integrations.live import OnlineCheck
from lazyscope.model import Run
from lazyscope.model.meta import STATUS_OK, STATUS_RUNNING
from lazyscope.model.source_files import SOURCES
from lazyscope.store.follow import MISSING, NOT_A_RUN, follow
from lazyscope.store.lock import describe_holder

#: seconds between two reads of the run
POLL_S = 0.25
#: steps/s over the last this many steps (their own wall times)
RATE_STEPS = 20
#: a read that fails while the run is written is tried again this many polls before it counts
RETRIES = 8


def _say(text: str, live: TraceProgress) -> None:
    if not live.above(text):
        streams.echo(text)
        streams.flush()


def _note(text: str, live: TraceProgress) -> None:
    """A line about the watching itself (stderr; above the live line when one is drawn)."""
    if not live.above(text):
        streams.echo(text, to_err=True)


def _counts(run: Run) -> tuple[int, int, float | None, float | None]:
    """Steps, compilations, the last step's seconds, steps per second (its last steps)."""
    steps = run.steps
    n = len(steps)
    col = steps.col("compile_count")
    compiles = int(np.nansum(col)) if col is not None and len(col) else 0
    walls = steps.values("wall_s") if n else np.zeros(0)
    last = float(walls[-1]) if n and math.isfinite(walls[-1]) else None
    recent = walls[-RATE_STEPS:]
    recent = recent[np.isfinite(recent)]
    rate = len(recent) / float(recent.sum()) if len(recent) and recent.sum() > 0 else None
    return n, compiles, last, rate


def _wait_for_run(source: Any, timeout: float) -> None:
    """Until ``source`` holds a run; RunDirError (exit 3) when it is something else, or when
    none appeared within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    said = False
    while True:
        state = source.state()
        if state == NOT_A_RUN:
            raise RunDirError(source.why)
        if state != MISSING:
            return
        if not said:
            streams.echo(f"lazyscope watch: waiting for a run in {source.name} "
                         f"(up to {timeout:g} s)", to_err=True)
            said = True
        if time.monotonic() >= deadline:
            raise RunDirError(f"{source.name}: no run appeared there within {timeout:g} s "
                              f"(start `lazyscope trace --out {source.name} ...`, or wait "
                              "longer with --timeout)")
        time.sleep(POLL_S)


@click.command("watch", context_settings=CONTEXT)
@click.argument("run")
@click.option("--timeout", type=Real(minimum=0, maximum=MAX_SECONDS), default=60.0,
              show_default=True,
              metavar="S", help="how long to wait for RUN to appear (a trace just starting)")
@click.option("--every", type=Real(minimum=0, maximum=MAX_SECONDS), default=5.0,
              show_default=True,
              metavar="S", help="not on a terminal: at most one progress line every S seconds")
@click.option("--warmup-steps", type=Whole(minimum=0), default=None, metavar="N",
              help="count every compilation from step N on as a recompilation (as the trace's "
                   "--warmup-steps)")
@click.option("--quiet", "-q", is_flag=True, help="no progress: the alerts and the verdict only")
def watch_cmd(run: str, timeout: float, every: float, warmup_steps: int | None,
              quiet: bool) -> int:
    """Follow a run being written (`lazyscope trace --out RUN` in another terminal): its
    steps, steps/s, compilations and last step time, and the same alerts as the trace prints,
    until the trace ends; then its final verdict.

    \b
    lazyscope watch runs/train
    lazyscope watch gs://bucket/run/host0     (one host's part of a run at a URL)

    A RUN that does not exist yet is waited for (--timeout). Exit 0 when the run ended ok, 5
    when it failed, was interrupted or was killed (its error and the line it was raised at
    said). Ctrl-C stops watching (exit 130); the run is never touched.
    """

    source = follow(run)
    _wait_for_run(source, timeout)
    check = OnlineCheck(None, warmup_steps)
    live = TraceProgress(None, enabled=live_wanted(quiet))
    seen, failures, shown_at, shown = 0, 0, -math.inf, -1
    with live:
        while True:
            writer = source.writer()  # first: a run read after its writer ended is whole
            try:
                current = source.load()
                failures = 0
            except RunDirError:
                failures += 1
                if writer is None or failures > RETRIES:
                    raise
                time.sleep(POLL_S)
                continue
            if seen == 0 and shown < 0:
                who = f"written by {describe_holder(writer)}" if writer is not None else \
                    f"status {current.status}"
                _note(f"lazyscope watch: following {source.name} ({who})", live)
                shown = 0
            n = len(current.steps)
            if n > seen or check.pending:
                for alert in check.after_steps(current, seen):
                    _say(f"lazyscope: {alert.line()}", live)
                seen = max(seen, n)
            steps, compiles, last, rate = _counts(current)
            live.show(steps, compiles, last, rate)
            ended = writer is None
            now = time.monotonic()
            if not quiet and not live.enabled and steps != shown and \
                    (ended or now - shown_at >= every):
                step, info = progress_parts(steps, None, compiles, last, rate)
                _note(f"lazyscope watch: {step} · {info}", live)
                shown_at, shown = now, steps
            if ended:
                break
            time.sleep(POLL_S)
    report = build_report(current, warmup_steps=warmup_steps, sources=SOURCES)
    streams.echo(one_line(f"lazyscope watch: {source.name} {ending(current)}, "
                          f"{report.summary.steps} steps (the whole report: lazyscope report "
                          f"{source.name})"), to_err=True)
    streams.echo(f"verdict: {report.verdict}")
    return EXIT_OK if current.meta.status == STATUS_OK else EXIT_TARGET_FAILED


def ending(run: Run) -> str:
    """How a followed run ended, as ``watch`` says it: ``ended: status ok``; a run that did
    not end ok with its error and the program's line it was raised at
    (``ended: status failed: ValueError: boom (at train.py:12)``); a run whose writer
    went away without finalising it (killed: SIGKILL, the out-of-memory killer, a machine
    gone) as such."""
    meta = run.meta
    if meta.status == STATUS_RUNNING:
        return ("was not finalised: its trace was killed (SIGKILL, the out-of-memory killer, "
                "its machine going down) without a trace of where")
    said = f"ended: status {run.status}"
    if meta.status == STATUS_OK:
        return said
    error = meta.error or ""
    line = meta.run_info.error_frame
    if line is not None and f"{line.file}:{line.line}" not in error:
        error += f" (at {line.file}:{line.line})"  # the error's own text may name it already
    return said + (f": {error.strip()}" if error else "")
