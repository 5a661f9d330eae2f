"""The command line. Each command: validate -> core call -> render. No logic lives here.

``main(argv) -> int`` is the one error boundary: a LazyscopeError or a click usage error becomes
one line on stderr (``lazyscope: ...``) and its exit code (see :mod:`lazyscope.errors`); an
OSError nobody foresaw (a path too long to even look at) is a run-directory line (exit 3), and
any other exception of lazyscope's own is "internal error" with its traceback in a crash file
(exit 70), never a traceback on the terminal. Everything lazyscope writes goes through
:mod:`lazyscope.streams` (private copies of stdout and stderr taken before the traced program
runs), and termination signals finalise a trace like Ctrl-C (:mod:`lazyscope.signals`). In a
forked child of a traced program, main() lets whatever ends the child through untouched.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import click

from lazyscope import signals, streams
from lazyscope.analyze.buckets import DEFAULT_HORIZON
from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.diff import diff_reports
from lazyscope.analyze.ranks import build_any
from lazyscope.analyze.report import build_report
from lazyscope.backends import BACKENDS
from lazyscope.backends.base import TraceOptions
from lazyscope.backends.profiling import ProfileWindow, default_steps, parse_profile_steps
from lazyscope.compare import (
    DEFAULT_POLICIES,
    advise_target,
    parse_backends,
    parse_policies,
    run_compare,
)
from lazyscope.errors import (
    EXIT_CHECK_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_RUN_DIR,
    EXIT_SIGNAL_BASE,
    EXIT_TARGET_FAILED,
    BrokenOutput,
    Interrupted,
    LazyscopeError,
    NoSpaceError,
    OutputError,
    RunDirError,
    Signalled,
    TargetFailed,
    UsageError,
    one_line,
    os_reason,
    show_path,
    signal_name,
)
from lazyscope.model import RankedRun, runs_by_rank
from lazyscope.online import LiveAlerts
from lazyscope.render import RENDERERS, render_text
from lazyscope.render.check import CHECK_RENDERERS
from lazyscope.render.compare import (
    COMPARE_PNG,
    render_advice_json,
    render_advice_text,
    render_compare_text,
    render_emit,
    write_compare_html,
    write_compare_png,
)
from lazyscope.render.console import (
    CompareProgress,
    ProgressPipe,
    TraceProgress,
    colour_wanted,
    is_terminal,
    live_wanted,
    print_report,
)
from lazyscope.render.diff import DIFF_RENDERERS
from lazyscope.render.export import FORMATS as EXPORT_FORMATS
from lazyscope.render.export import default_out as export_default_out
from lazyscope.render.export import export_perfetto, export_tables
from lazyscope.render.tensorboard import (
    check_tensorboard,
    free_port,
    serving_dir,
    start_tensorboard,
    stop_tensorboard,
)
from lazyscope.render.tensorboard import urls as tensorboard_urls
from lazyscope.render.views import write_views
from lazyscope.runner import (
    SCENARIOS,
    Target,
    launcher_rank,
    resolve_target,
    scenario_options,
    trace_target,
)
from lazyscope.sources import SOURCES
from lazyscope.store import load_target

CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="lazyscope", prog_name="lazyscope")
def cli() -> None:
    """lazyscope: find what makes a PyTorch/XLA (or torch.compile) program slow.

    \b
    lazyscope scenarios                       list the built-in workloads
    lazyscope trace [OPTIONS] NAME|SCRIPT.py [ARGS]
                                              run one under instrumentation (lazyscope's
                                              options before the target, the program's after)
    lazyscope report RUN_DIR                  re-render a saved run
    lazyscope export RUN_DIR --format F       perfetto trace, parquet or csv tables
    lazyscope tensorboard RUN_DIR             open its profile and scalars in TensorBoard
    """


@cli.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    width = max(len(n) for n in SCENARIOS)
    for name, info in sorted(SCENARIOS.items()):
        click.echo(f"{name:<{width}}  {info.description}")


def _default_out(name: str) -> Path:
    """``runs/NAME-TIMESTAMP``; under a launcher, one directory shared by all ranks (named by
    the launcher's run id, else the minute). Without a launcher it is created exclusively
    (``-2`` ... when a trace started in the same second took it: see ``Tracer``)."""
    stem = Path(name).stem if name.endswith(".py") else name
    if launcher_rank() is not None:
        stamp = os.environ.get("TORCHELASTIC_RUN_ID") or _dt.datetime.now().strftime(
            "%Y%m%d-%H%M")
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def _warn(lines: list[str]) -> None:
    for line in lines:
        streams.echo(f"lazyscope: warning: {one_line(line)}", to_err=True)


def _report_and_views(run_dir: Path, *, warmup_steps: int | None = None,
                      views: bool = True, need_html: bool = False,
                      warnings: list[str] | None = None) -> Any:
    """Load a run (or a multi-process run), build its report once, write its views (their
    warnings printed, or appended to ``warnings`` when given)."""

    report = build_any(load_target(run_dir), warmup_steps=warmup_steps,
                       sources=SOURCES)
    if views:
        lines = write_views(report, run_dir, need_html=need_html)
        if warnings is None:
            _warn(lines)
        else:
            warnings.extend(lines)
    return report


DYNAMIC = {"auto": None, "true": True, "false": False}


def program_args(args: tuple[str, ...]) -> list[str]:
    """The program's arguments as given after the target; a ``--`` right after the target is
    dropped (the way lazyscope used to separate them, still accepted)."""
    out = list(args)
    return out[1:] if out[:1] == ["--"] else out


def _misplaced(command: click.Command, args: list[str], target: Target) -> list[str]:
    """Options of ``command`` found among the program's arguments (``--out``, ``--steps=3``)
    that a scenario does not define itself (its ``--steps`` is its own)."""
    names = {n for p in command.params for n in (*p.opts, *p.secondary_opts) if n.startswith("--")}
    found = [a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in names]
    return [n for n in found if n not in scenario_options(target)] if found else []


def _order_hint(command: str, misplaced: list[str], target: str) -> str:
    """What to say when a lazyscope option was written after the target."""
    them = ", ".join(dict.fromkeys(misplaced))
    return (f"{them} after {target} went to {target}, not to lazyscope: lazyscope's options go "
            f"before the target (lazyscope {command} {misplaced[0]} ... {target} ...)")


#: how a command that runs a program parses its line: lazyscope's options, then the target;
#: everything after the target is the program's, untouched (as python, pyinstrument and py-spy)
PROGRAM_LINE = {**CONTEXT, "allow_interspersed_args": False}


@cli.command("trace", context_settings=PROGRAM_LINE)
@click.argument("target")
@click.argument("target_args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="steps to run (a scenario's --steps; a script is stopped after N barriers)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="run directory (default runs/NAME-TIMESTAMP)")
@click.option("--force", is_flag=True, help="replace an existing run directory")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="xla", show_default=True,
              help="where the program runs")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="eager/compile backends: the device scenarios run on")
@click.option("--dynamic", type=click.Choice(sorted(DYNAMIC)), default="auto",
              show_default=True, help="compile backend: torch.compile's dynamic= for scenarios")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, metavar="N",
              help="count every compilation from step N on as a recompilation (default: "
              "found by the analysis: a graph's first compile at a new site or phase is never "
              "one)")
@click.option("--profile", is_flag=True,
              help="capture an XProf profile of a window of steps into RUN/tensorboard/")
@click.option("--profile-steps", metavar="A:B", default=None,
              help="steps A..B-1 to profile (implies --profile; default 2:5)")
@click.option("--graph-shapes/--no-graph-shapes", default=True, show_default=True,
              help="XLA: record each compiled graph's inputs to explain recompilations "
              "(XLA dumps each graph's HLO when it compiles it; steps that reuse a compiled "
              "graph cost nothing extra)")
@click.option("--views/--no-views", default=True, show_default=True,
              help="write report.html, the PNG plots and TensorBoard scalars after the run "
              "(a few seconds; `lazyscope report RUN --format html` writes them later)")
@click.option("--quiet", "-q", is_flag=True,
              help="no progress line and no live alerts while the program runs, no colour in "
                   "the report")
# compare's channel for its policies' progress (render/console.py ProgressPipe)
@click.option("--progress-fd", type=int, default=None, hidden=True)
def trace_cmd(target: str, target_args: tuple[str, ...], steps: int | None, out: Path | None,
              force: bool, backend: str, device: str, dynamic: str, warmup_steps: int | None,
              profile: bool, profile_steps: str | None, graph_shapes: bool, views: bool,
              quiet: bool, progress_fd: int | None) -> None:
    """Run a scenario or a script under instrumentation and print its report.

    \b
    lazyscope trace [OPTIONS] TARGET [ARGS]...
    lazyscope trace --steps 20 --out runs/mine train.py --lr 0.1

    TARGET is a scenario name (see `lazyscope scenarios`) or a path to a .py script.
    lazyscope's options go before TARGET; everything after TARGET is the program's own
    arguments, passed on untouched (as `python`, pyinstrument and py-spy do): an option of
    lazyscope's written after TARGET goes to the program. A `--` right after TARGET is dropped.
    """

    args = program_args(target_args)
    resolved = resolve_target(target, args)
    unique = out is None and launcher_rank() is None
    out = out if out is not None else _default_out(target)
    window = _profile_window(profile, profile_steps, steps, out)
    options = TraceOptions(backend=backend, device=device, dynamic=DYNAMIC[dynamic],
                           graph_shapes=graph_shapes, max_steps=steps,
                           warmup_steps=warmup_steps)
    misplaced = _misplaced(trace_cmd, args, resolved)
    pipe = ProgressPipe(progress_fd) if progress_fd is not None else None
    live = TraceProgress(steps, enabled=live_wanted(quiet, launched=launcher_rank() is not None))
    alerts = LiveAlerts(lambda line: live.above(line) or streams.echo(line, to_err=True),
                        warmup_steps=warmup_steps, enabled=not quiet)
    observers = [live.attach, alerts.attach] + ([pipe.attach] if pipe is not None else [])

    def hard_exit(tracer: Any, code: int | None) -> int | None:
        # the program ends the process with os._exit()/os.abort(): its run is finalised
        live.__exit__(None, None, None)  # the live line goes before the report is printed
        return _ended_without_unwinding(tracer, code, resolved.name, views, quiet)

    try:
        with live, streams.theirs():  # the program's own stdout/stderr while it runs
            tracer = trace_target(resolved, out, options=options, force=force, profile=window,
                                  observers=observers, unique_out=unique, on_hard_exit=hard_exit)
    except UsageError as err:
        if misplaced:  # the scenario refused an option that was meant for lazyscope
            raise UsageError(f"{err}; {_order_hint('trace', misplaced, target)}") from None
        if getattr(err, "run_dir", None):  # lazyscope refused inside the program: a run is kept
            err.after = _show_kept(err.run_dir, views=views)  # type: ignore[attr-defined]
        raise
    except (TargetFailed, Interrupted, Signalled, OutputError) as err:
        if not getattr(err, "nothing_recorded", False) and getattr(err, "run_dir", None):
            # the error line first, then what could not be written: views are not even tried
            # on a full disk
            err.after = _show_kept(err.run_dir,  # type: ignore[attr-defined]
                                   views=views and not isinstance(err, NoSpaceError))
        if misplaced and isinstance(err, TargetFailed) and "exited with status 2" in str(err):
            # a program that refused its arguments (argparse's exit 2): the option was meant
            # for lazyscope; a program that took them and failed later is told nothing of it
            err.after = [*(getattr(err, "after", None) or []),
                         _order_hint("trace", misplaced, target)]
        raise
    finally:
        if pipe is not None:
            pipe.close()
    _show_run(tracer, views, quiet)


def _show_run(tracer: Any, views: bool, quiet: bool) -> None:
    """The report of a finished trace, and where its run is."""
    run_dir = tracer.path
    report = _report_and_views(run_dir, views=views)
    print_report(render_text(report) + "\n", clean=report.clean, colour=colour_wanted(quiet),
                 echo=_echo_as_is)
    if tracer.moved_to is not None:
        _warn([f"{show_path(tracer.out)} was moved to {show_path(tracer.moved_to)} while the "
               "program ran; the run is kept there"])
        streams.echo(f"run saved in {show_path(tracer.moved_to)}")
    else:
        streams.echo(f"run saved in {show_path(tracer.out)}")


def _ended_without_unwinding(tracer: Any, code: int | None, name: str, views: bool,
                             quiet: bool) -> int | None:
    """The program called ``os._exit(code)`` (``code`` None: ``os.abort()``) with a trace live;
    its run is finalised: print what a normal end prints; the exit status to end with."""
    streams.revalidate()
    try:
        if code == 0 and tracer.status == "ok":
            _show_run(tracer, views, quiet)
            return 0
        line = (f"lazyscope: {show_path(name)} failed: {tracer.error}; the run so far is kept "
                f"in {show_path(tracer.out)} (status {tracer.status})")
        streams.echo(one_line(line), to_err=True)
        return EXIT_TARGET_FAILED if code is not None else None
    except LazyscopeError as err:
        if str(err):
            streams.echo(f"lazyscope: {one_line(str(err))}", to_err=True)
        return err.exit_code
    finally:
        try:
            streams.flush()
        except LazyscopeError:
            pass


def _show_kept(out: Path, *, views: bool = True) -> list[str]:
    """After a failed trace, print what was recorded (if anything readable was); return the
    warning lines (printed after the error line)."""

    warnings: list[str] = []
    try:
        if (Path(out) / "meta.json").exists():
            streams.echo(render_text(_report_and_views(out, views=views, warnings=warnings)))
    except BrokenOutput:
        pass  # stdout's reader went away: the error line still goes to stderr
    except (LazyscopeError, OSError) as err:
        warnings.append(f"could not render {show_path(out)}: {err}")
    return warnings


@cli.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="html writes RUN_DIR/report.html and prints its path")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, metavar="N",
              help="count every compilation from step N on as a recompilation")
def report_cmd(run_dir: Path, fmt: str, warmup_steps: int | None) -> None:
    """Re-render a saved run as text or json, or write its views (--format html:
    RUN_DIR/report.html with the plots inline, the PNGs, the TensorBoard scalars)."""

    if fmt == "html" and (run_dir / "compare.json").is_file() and not (run_dir / "meta.json").exists():

        try:  # a `lazyscope compare` directory
            click.echo(str(write_compare_html(run_dir)))
        except (ValueError, UnicodeDecodeError) as err:
            raise RunDirError(f"{run_dir / 'compare.json'}: not a lazyscope comparison: "
                              f"{err}") from None
        return
    report = _report_and_views(run_dir, warmup_steps=warmup_steps, views=fmt == "html",
                               need_html=fmt == "html")
    if fmt == "html":
        click.echo(str(run_dir / "report.html"))
        return
    if fmt == "text":
        print_report(render_text(report), clean=report.clean, colour=colour_wanted(),
                     echo=_echo_as_is)
        return
    click.echo(RENDERERS[fmt](report))


def _echo_as_is(text: str) -> None:
    streams.echo(text, nl=False)


@cli.command("export")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="perfetto",
              show_default=True,
              help="perfetto: a Chrome trace JSON (ui.perfetto.dev, chrome://tracing, "
              "vizviewer); parquet, csv: steps and events tables (pandas)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="perfetto: the file (default RUN_DIR/trace.json); parquet, csv: the "
              "directory of steps.EXT and events.EXT (default RUN_DIR)")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, metavar="N",
              help="perfetto: the findings marked on events count every compilation from "
              "step N on")
def export_cmd(run_dir: Path, fmt: str, out: Path | None, warmup_steps: int | None) -> None:
    """Write a saved run in a format other tools read; prints the paths written.

    A multi-process run is one file: a process (track group) per rank in the trace, a rank
    column in the tables."""

    target = load_target(run_dir)
    # what the run's files lost is said here too: an export of a damaged run is not silent
    ranked = target.ranks if isinstance(target, RankedRun) else {None: target}
    _warn([(f"rank {rank}: " if rank is not None else "") + w
           for rank, run in ranked.items() for w in run.warnings])
    default = export_default_out(run_dir, fmt)
    out = out if out is not None else default
    if fmt == "perfetto" and out.is_dir():  # one file: into the directory, as cp does
        out = out / default.name
    if fmt == "perfetto":
        runs = {rank: (run, build_report(run, warmup_steps=warmup_steps))
                for rank, run in runs_by_rank(target).items()}
        paths = export_perfetto(runs, out)
    else:
        paths = export_tables(target, fmt, out)
    for path in paths:
        click.echo(str(path))


class _PositiveSeconds(click.ParamType):
    """Seconds > 0 (``inf``: a limit that never fails); ``nan`` is refused (every comparison
    with it is false: the rule would pass anything)."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if math.isnan(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a number of seconds above 0", param, ctx)
        return seconds


def _one_rule(new: int | None, old: int | None) -> int | None:
    """--max-recompiles and its old name --max-compiles-after-warmup are one rule: given both
    with different values, which one was meant is not known."""
    if new is not None and old is not None and new != old:
        raise UsageError(f"--max-recompiles {new} and --max-compiles-after-warmup {old} are one "
                         "rule (the second is the first's old name) given two limits; give one")
    return new if new is not None else old


def _measured_for(report: Any, rules: Rules) -> None:
    """Refuse a rule on a metric the run does not measure (it would pass whatever the program
    did): exit 2."""
    summary = getattr(report, "summary", None)
    if rules.max_syncs_per_step is not None and summary is not None and \
            getattr(summary, "syncs", 0) is None:
        raise UsageError(
            f"--max-syncs-per-step cannot be checked: host syncs are not measured by the "
            f"{summary.backend} backend on {summary.device or 'this device'} (see the run's "
            "notes)")


@cli.command("check")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--max-recompiles", "max_recompiles",
              type=click.IntRange(min=0), default=None, metavar="N",
              help="at most N recompilations in steady state (the default rule, N=0)")
@click.option("--max-compiles-after-warmup", "max_recompiles_old",
              type=click.IntRange(min=0), default=None, metavar="N", hidden=True,
              help="the old name of --max-recompiles")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, metavar="N",
              help="steady state starts at step N: every compilation from there on counts")
@click.option("--max-syncs-per-step", type=click.IntRange(min=0), default=None, metavar="N",
              help="at most N host syncs in any step")
@click.option("--no-fallbacks", is_flag=True, help="no CPU-fallback op may run")
@click.option("--no-graph-breaks", is_flag=True, help="no torch.compile graph break")
@click.option("--no-rank-divergence", is_flag=True,
              help="a multi-process run's ranks compile the same graphs at the same pace")
@click.option("--max-step-seconds", type=_PositiveSeconds(), default=None,
              metavar="S", help="no steady step may take longer than S seconds")
@click.option("--allow-incomplete", is_flag=True,
              help="check a failed, interrupted or killed run's recorded steps instead of failing")
@click.option("--baseline", type=click.Path(path_type=Path), default=None, metavar="BASE",
              help="fail when the steady step got slower than BASE's (beyond both runs' "
                   "spread), or compilations or host syncs per step rose")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def check_cmd(run_dir: Path, max_recompiles: int | None, max_recompiles_old: int | None,
              warmup_steps: int | None,
              max_syncs_per_step: int | None, no_fallbacks: bool, no_graph_breaks: bool,
              no_rank_divergence: bool, max_step_seconds: float | None,
              allow_incomplete: bool, baseline: Path | None, fmt: str) -> int:
    """A CI gate: exit 0 when RUN_DIR obeys the rules, 1 (with the evidence) when not.

    With no rule given, checks --max-recompiles 0: no recompilation in steady state. A run that
    did not end ok (failed, interrupted, killed) fails unless --allow-incomplete.
    """

    max_recompiles = _one_rule(max_recompiles, max_recompiles_old)
    rules = Rules(max_recompiles=max_recompiles, max_syncs_per_step=max_syncs_per_step,
                  no_fallbacks=no_fallbacks, no_graph_breaks=no_graph_breaks,
                  no_rank_divergence=no_rank_divergence, max_step_seconds=max_step_seconds,
                  allow_incomplete=allow_incomplete)
    report = _report_and_views(run_dir, warmup_steps=warmup_steps, views=False)
    _measured_for(report, rules)
    base = (_report_and_views(baseline, warmup_steps=warmup_steps, views=False)
            if baseline is not None else None)
    result = check_report(report, rules, baseline=base)
    click.echo(CHECK_RENDERERS[fmt](result), nl=False)
    return 0 if result.passed else EXIT_CHECK_FAILED


@cli.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def diff_cmd(run_a: Path, run_b: Path, fmt: str) -> None:
    """What changed from RUN_A (the baseline) to RUN_B: metrics, sites, findings."""
    a = _report_and_views(run_a, views=False)
    b = _report_and_views(run_b, views=False)
    click.echo(DIFF_RENDERERS[fmt](diff_reports(a, b)), nl=False)


# -- views: HTML report, TensorBoard ----------------------------------------------------------


#: what a profile of XLA:CPU can and cannot show (docs/profiles.md says why)
PROFILE_ON_CPU = ("XLA:CPU: the overview's step time is host time; its device fields stay 0, "
                  "there is no device plane on a CPU")


def _profiled_on_cpu(report: Any) -> bool:
    profile = report.profile or {}
    return bool(profile.get("captured_steps")) and "CPU" in (report.summary.device or "")


def _profile_window(profile: bool, profile_steps: str | None, steps: int | None, out: Path):
    """The ProfileWindow that --profile/--profile-steps ask for, or None."""
    if not profile and profile_steps is None:
        return None
    first, last = parse_profile_steps(profile_steps) if profile_steps else default_steps(steps)
    return ProfileWindow(out / "tensorboard", first, last)


@cli.command("tensorboard")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=6006, show_default=True,
              help="port to serve on (0: any free port)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to bind: 0.0.0.0 serves every interface (a TPU VM you reach "
              "without an ssh tunnel); the default is reachable through `ssh -L`")
def tensorboard_cmd(run_dir: Path, port: int, host: str) -> None:
    """Serve a run's profile and scalars with TensorBoard until Ctrl-C.

    \b
    On a remote machine (a TPU VM), forward the port from your own machine:
      ssh -L 6006:127.0.0.1:6006 VM      then open http://127.0.0.1:6006/
    A run on a read-only file system is served from a temporary copy of its log directory."""
    import signal


    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)

    check_tensorboard()
    report = _report_and_views(run_dir, views=False)
    # `kill PID` stops TensorBoard and removes a temporary copy, from here on (start-up too)
    signal.signal(signal.SIGTERM, _terminate)
    logdir, cleanup = serving_dir(report, run_dir)
    port = port or free_port()
    try:
        proc = start_tensorboard(logdir, port, host=host)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        links = tensorboard_urls(shown, port)
        click.echo(f"TensorBoard for {run_dir}: http://{shown}:{port}/ (Ctrl-C to stop)")
        click.echo(f"  scalars, unsmoothed: {links['scalars']}  (legacy dashboard: "
                   f"{links['scalars (legacy)']})")
        click.echo(f"  counts per step:     {links['counts']}")
        click.echo(f"  profile:             {links['profile']}"
                   + (f"  ({PROFILE_ON_CPU})" if _profiled_on_cpu(report) else ""))
        try:
            proc.wait()
        finally:
            stop_tensorboard(proc)
    finally:
        cleanup()


# ---- compare and advise (issue 3) -------------------------------------------------------


@cli.command("compare", context_settings=PROGRAM_LINE)
@click.argument("scenario")
@click.argument("scenario_args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@click.option("--policies", default=DEFAULT_POLICIES, show_default=True,
              help="comma-separated padding policies (bucket:B1,B2,... keeps its commas; "
              "auto: what `lazyscope advise` recommends for the scenario's own lengths)")
@click.option("--steps", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="run every policy N times, rounds in alternating order; each row shows its "
              "median run (a busy machine's noise)")
@click.option("--backends", default=None,
              help="comma-separated backends (e.g. xla,compile): every backend x policy, one table")
@click.option("--preset", default=None,
              help="the scenario's --preset (decoder: tiny|seed; hf-gpt2: tiny|small)")
@click.option("--mode", default=None, help="the scenario's --mode (train|eval)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="comparison directory (default runs/compare-SCENARIO-TIMESTAMP)")
@click.option("--force", is_flag=True, help="replace an existing comparison directory")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="no live progress lines")
def compare_cmd(scenario: str, scenario_args: tuple[str, ...], policies: str, steps: int,
                repeat: int, backends: str | None, preset: str | None, mode: str | None,
                out: Path | None, force: bool, fmt: str, quiet: bool) -> int:
    """Run SCENARIO once per padding policy (each in a fresh process) and compare them.

    \b
    lazyscope compare [OPTIONS] SCENARIO [ARGS]...
    lazyscope compare --policies max,pow2 --steps 20 decoder --batching grouped

    Writes OUT/<policy>/ (a run directory each; OUT/<backend>/<policy>/ with --backends),
    OUT/compare.json, OUT/compare.png and OUT/report.html. lazyscope's options go before
    SCENARIO; everything after it goes to the scenario untouched.
    """
    import json as _json


    extra = program_args(scenario_args)
    misplaced = _misplaced(compare_cmd, extra, resolve_target(scenario, []))
    if preset:
        extra += ["--preset", preset]
    if mode:
        extra += ["--mode", mode]
    out = out or _default_out(f"compare-{scenario}")
    live = CompareProgress(f"compare {scenario}", steps, enabled=live_wanted(quiet),
                           echo=lambda line: click.echo(line, err=fmt == "json"),
                           # the summaries also go to stdout when that is not the terminal
                           echo_when_live=fmt == "text" and not is_terminal(1))
    try:
        with live:
            result = run_compare(scenario, parse_policies(policies), steps=steps, out=out,
                                 extra=extra, force=force, progress=live.update,
                                 backends=parse_backends(backends), repeat=repeat)
    except UsageError as err:
        if misplaced:  # the scenario refused an option that was meant for lazyscope
            raise UsageError(f"{err}; {_order_hint('compare', misplaced, scenario)}") from None
        raise
    try:
        write_compare_png(result, out / COMPARE_PNG)
    except OSError as err:
        click.echo(f"lazyscope: warning: could not write {out / COMPARE_PNG}: {err}", err=True)
    try:

        write_compare_html(out, result)
    except OSError as err:
        click.echo(f"lazyscope: warning: could not write {out / 'report.html'}: {err}", err=True)
    if fmt == "json":
        click.echo(_json.dumps(result.to_json(), indent=2))
    else:
        click.echo("")
        click.echo(render_compare_text(result), nl=False)
        click.echo(f"comparison saved in {out} (compare.json, compare.png, report.html, one run "
                   f"per {'backend x policy' if backends else 'policy'})")
    return EXIT_TARGET_FAILED if result.failed else 0


@cli.command("advise")
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@click.option("--lengths", "lengths_path", type=click.Path(path_type=Path), default=None,
              help="a file of sequence lengths, one per line (instead of RUN_DIR)")
@click.option("--horizon", type=click.IntRange(min=1), default=None, metavar="STEPS",
              help=f"steps of your run to plan for (default {DEFAULT_HORIZON:,}: a long "
              "training run; compilation weighs more in a short one)")
@click.option("--max-buckets", type=click.IntRange(min=1), default=8, show_default=True,
              help="largest K to try")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="sequences per batch, with --lengths (default 8; a run says its own)")
@click.option("--max-len", type=click.IntRange(min=1), default=None,
              help="the longest length a batch may hold (default: the run's max_len, else "
              "the longest seen)")
@click.option("--grouped", is_flag=True, help="batches formed inside buckets (--lengths)")
@click.option("--no-model-changes", is_flag=True,
              help="leave out policies the model must change for (packed rows need a "
              "document mask or position_ids)")
@click.option("--compare", "compare_dir", type=click.Path(path_type=Path), default=None,
              help="a `lazyscope compare` directory of the same workload: its measured numbers "
              "beside the predicted ones (default: the comparison RUN_DIR belongs to)")
@click.option("--emit", is_flag=True,
              help="print the code to paste for the recommended policy (lazyscope.data)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def advise_cmd(run_dir: Path | None, lengths_path: Path | None, horizon: int | None,
               max_buckets: int, batch: int | None, max_len: int | None, grouped: bool,
               no_model_changes: bool, compare_dir: Path | None, emit: bool,
               fmt: str) -> None:
    """Which padding policy processes RUN_DIR's data fastest, end to end: pad to max, K exact
    buckets, a length-grouped sampler or packed rows, ranked by predicted real tokens/s over
    your run, calibrated on RUN_DIR's own compile and execute seconds.

    RUN_DIR is any traced run (the lengths come from its graphs' varying dimension, or from its
    annotations), or a `lazyscope compare` directory (measured numbers beside the predicted
    ones). --emit prints the lines to paste.
    """
    advice = advise_target(run_dir, lengths_file=lengths_path, max_buckets=max_buckets,
                           horizon=horizon, batch=batch, max_len=max_len, grouped=grouped,
                           packing=not no_model_changes, compare_dir=compare_dir)
    if emit:
        click.echo(render_emit(advice), nl=False)
        return
    click.echo(render_advice_json(advice) if fmt == "json" else render_advice_text(advice),
               nl=False)


def _no_such_option(err: click.NoSuchOption) -> str:
    """click's message, and for a command that runs a program, where the program's options go
    (an option meant for the program, written before the target)."""
    command = err.ctx.command.name if err.ctx is not None else ""
    if command not in ("trace", "compare"):
        return err.format_message()
    near = [p for p in (err.possibilities or []) if p not in ("--help", "-h")]
    also = f" (did you mean {', '.join(near)}?)" if near else ""
    what = "SCENARIO" if command == "compare" else "TARGET"
    return (f"no such option {err.option_name}{also}: lazyscope's options go before {what}, "
            f"the program's own after it (lazyscope {command} [OPTIONS] {what} "
            f"{err.option_name} ...)")


def _say(message: str) -> None:
    """The one line of an error, on lazyscope's own stderr."""
    if message:
        streams.echo(f"lazyscope: {one_line(message)}", to_err=True)


def _crash_file(exc: BaseException) -> str | None:
    """Write the traceback of an internal error; its path, or None when it cannot be."""
    path = os.path.join(tempfile.gettempdir(), f"lazyscope-crash-{os.getpid()}.txt")
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"lazyscope {' '.join(sys.argv[1:])}\n\n")
            fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except OSError:
        return None
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising (see the module docstring)."""
    pid = os.getpid()
    streams.capture()
    try:
        with signals.handlers(), streams.ours():
            try:
                result = cli.main(args=argv, prog_name="lazyscope", standalone_mode=False)
                streams.flush()
            except BaseException as exc:
                if os.getpid() != pid:
                    raise  # a forked child of the traced program ends as the program's would
                return _exit_code(exc)
    except BaseException:
        if os.getpid() != pid:
            raise
        return EXIT_INTERNAL
    finally:
        if os.getpid() == pid:
            streams.release()
    return result if isinstance(result, int) else 0


def _exit_code(exc: BaseException) -> int:
    """The error boundary: one line on stderr for ``exc``, and the exit code."""
    try:
        raise exc
    except BrokenOutput as err:
        return err.exit_code
    except click.exceptions.Abort as err:
        # click turns Ctrl-C (SIGINT) into Abort: said as trace says it
        _say("interrupted" if isinstance(err.__context__, KeyboardInterrupt) else "aborted")
        return EXIT_INTERRUPTED
    except click.NoSuchOption as err:
        _say(_no_such_option(err))
        return err.exit_code
    except click.exceptions.NoArgsIsHelpError as err:
        # a usage page, not an error: its lines as click wrote them, never folded into one
        streams.echo(err.format_message(), to_err=True)
        return err.exit_code
    except click.ClickException as err:
        _say(err.format_message())
        return err.exit_code
    except click.exceptions.Exit as err:
        return err.exit_code
    except LazyscopeError as err:
        _say(str(err))
        _warn(getattr(err, "after", None) or [])
        return err.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except signals.Terminated as err:
        _say(f"terminated by {signal_name(err.signum)}")
        return EXIT_SIGNAL_BASE + err.signum
    except OSError as err:  # a path no check could even look at (a name too long ...)
        where = f"{show_path(err.filename)}: " if err.filename else ""
        _say(f"{where}{os_reason(err)}")
        return EXIT_RUN_DIR
    except SystemExit as err:
        code = err.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as err:  # noqa: BLE001 - lazyscope's own bug: one line, never a traceback
        where = _crash_file(err)
        _say(f"internal error: {type(err).__name__}: {err}"
             + (f" (details in {where}; please report it)" if where else ""))
        return EXIT_INTERNAL


__all__ = ["RunDirError", "cli", "main"]

if __name__ == "__main__":
    sys.exit(main())
