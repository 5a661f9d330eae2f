"""``lazyscope trace``: run a scenario or a script under instrumentation, print its report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from lazyscope.backends import BACKENDS
from lazyscope.backends.base import TraceOptions
from lazyscope.backends.profiling import ProfileWindow, default_steps, parse_profile_steps
from lazyscope.backends.runner import (
    default_backend,
    launcher_rank,
    resolve_target,
    trace_target,
)
from lazyscope.commands.common import (
    PROGRAM_LINE,
    URLS,
    Whole,
    default_out,
    echo_as_is,
    misplaced_options,
    order_hint,
    program_args,
    report_and_views,
    warn,
)
from lazyscope.commands.console import (
    ProgressPipe,
    TraceProgress,
    colour_wanted,
    live_wanted,
    print_report,
)
from lazyscope.core import streams
from lazyscope.core.errors import (
    EXIT_TARGET_FAILED,
    BrokenOutput,
    Interrupted,
    LazyscopeError,
    NoSpaceError,
    OutputError,
    Signalled,
    TargetFailed,
    UsageError,
    one_line,
    show_path,
)
from lazyscope.integrations.live import LiveAlerts
from lazyscope.render import render_text
from lazyscope.store.layout import META_FILE
from lazyscope.store.remote import drop_uploaded_spool, is_remote, local_path

DYNAMIC = {"auto": None, "true": True, "false": False}


@click.command("trace", context_settings=PROGRAM_LINE)
@click.argument("target")
@click.argument("target_args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@click.option("--steps", type=Whole(minimum=1), default=None,
              help="the run records N steps, then the program ends: a scenario is told to run N "
              "steps (its --steps), a script is stopped at its Nth step barrier")
@click.option("--out", default=None,
              help="run directory (default runs/NAME-TIMESTAMP), or a URL (gs://bucket/run, "
              "s3://..., file://...): each host of a pod writes its part URL/host<N>/")
@click.option("--force", is_flag=True, help="replace an existing run directory")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default=None,
              help="where the program runs (default: torchax for a script that imports torchax "
              "and not torch_xla, else xla)")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="eager/compile backends: the device scenarios run on")
@click.option("--dynamic", type=click.Choice(sorted(DYNAMIC)), default="auto",
              show_default=True, help="compile backend: torch.compile's dynamic= for scenarios")
@click.option("--warmup-steps", type=Whole(minimum=0), default=None, metavar="N",
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
def trace_cmd(target: str, target_args: tuple[str, ...], steps: int | None, out: str | None,
              force: bool, backend: str | None, device: str, dynamic: str, warmup_steps: int | None,
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
    out = out if out is not None else str(default_out(target))
    window = _profile_window(profile, profile_steps, steps,
                             Path(".") if is_remote(out) else local_path(out))
    options = TraceOptions(backend=backend or default_backend(resolved), device=device,
                           dynamic=DYNAMIC[dynamic],
                           graph_shapes=graph_shapes, max_steps=steps,
                           warmup_steps=warmup_steps)
    misplaced = misplaced_options(trace_cmd, args, resolved)
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
            raise UsageError(f"{err}; {order_hint('trace', misplaced, target)}") from None
        if err.run_dir:  # lazyscope refused inside the program: a run is kept
            err.after = _show_kept(err.run_dir, views=views)
        raise
    except (TargetFailed, Interrupted, Signalled, OutputError) as err:
        if not err.nothing_recorded and err.run_dir:
            # the error line first, then what could not be written: views are not even tried
            # on a full disk
            err.after = _show_kept(err.run_dir,
                                   views=views and not isinstance(err, NoSpaceError))
        if err.run_dir:  # a URL's part that reached its bucket: its spool goes now
            drop_uploaded_spool(Path(err.run_dir))
        if misplaced and isinstance(err, TargetFailed) and "exited with status 2" in str(err):
            # a program that refused its arguments (argparse's exit 2): the option was meant
            # for lazyscope; a program that took them and failed later is told nothing of it
            err.after.append(order_hint("trace", misplaced, target))
        raise
    finally:
        if pipe is not None:
            pipe.close()
    _show_run(tracer, views, quiet, url=out if is_remote(out) else None)


def _show_run(tracer: Any, views: bool, quiet: bool, url: str | None = None) -> None:
    """The report of a finished trace, and where its run is (a URL's part: this host's, read
    from its spool, which goes once it reached the bucket)."""
    run_dir = tracer.path
    part = None
    if url is not None and tracer.remote is not None:
        # the report is headed by the part's URL, not by the spool it was read from
        part = URLS[Path(run_dir)] = f"{url.rstrip('/')}/host{tracer.remote.spool.host}"
    report = report_and_views(run_dir, views=views and url is None)
    print_report(render_text(report) + "\n", clean=report.clean, colour=colour_wanted(quiet),
                 echo=echo_as_is)
    if part is not None and tracer.remote is not None:
        spool = tracer.remote.spool
        if tracer.upload_error is None:
            spool.remove()
            streams.echo(f"run saved in {part} (`lazyscope report {url}` reads every host)")
        else:
            warn([f"could not upload to {part}: {tracer.upload_error}; the part is kept in "
                  f"{spool.path}, and the next lazyscope command on this host uploads it"])
        return
    if tracer.moved_to is not None:
        warn([f"{show_path(tracer.out)} was moved to {show_path(tracer.moved_to)} while the "
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
                f"in {tracer.kept_in()} (status {tracer.status})")
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


def _show_kept(out: str | os.PathLike[str], *, views: bool = True) -> list[str]:
    """After a failed trace, print what was recorded (if anything readable was); return the
    warning lines (printed after the error line)."""

    warnings: list[str] = []
    try:
        if (Path(out) / META_FILE).exists():
            streams.echo(render_text(report_and_views(out, views=views, warnings=warnings)))
    except BrokenOutput:
        pass  # stdout's reader went away: the error line still goes to stderr
    except (LazyscopeError, OSError) as err:
        warnings.append(f"could not render {show_path(out)}: {err}")
    return warnings


def _profile_window(profile: bool, profile_steps: str | None, steps: int | None, out: Path):
    """The ProfileWindow that --profile/--profile-steps ask for, or None."""
    if not profile and profile_steps is None:
        return None
    first, last = parse_profile_steps(profile_steps) if profile_steps else default_steps(steps)
    return ProfileWindow(out / "tensorboard", first, last)
