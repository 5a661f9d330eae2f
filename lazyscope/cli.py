"""The command line. Each command: validate -> core call -> render. No logic lives here.

``main(argv) -> int`` never lets a foreseen error escape as a traceback: a LazyscopeError or a
click usage error becomes one line on stderr (``lazyscope: ...``) and its exit code (see
:mod:`lazyscope.errors`).
"""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

import click

from lazyscope.backends import BACKENDS
from lazyscope.errors import EXIT_INTERRUPTED, LazyscopeError, RunDirError
from lazyscope.model import load_run

CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="lazyscope", prog_name="lazyscope")
def cli() -> None:
    """lazyscope: find what makes a PyTorch/XLA (or torch.compile) program slow.

    \b
    lazyscope scenarios                       list the built-in workloads
    lazyscope trace NAME|SCRIPT.py [ARGS]     run one under instrumentation
    lazyscope report RUN_DIR                  re-render a saved run
    """


@cli.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    from scenarios import SCENARIOS

    width = max(len(n) for n in SCENARIOS)
    for name, info in sorted(SCENARIOS.items()):
        click.echo(f"{name:<{width}}  {info.description}")


def _default_out(name: str) -> Path:
    stem = Path(name).stem if name.endswith(".py") else name
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def _write_artifacts(run_dir: Path) -> None:
    """Render a saved run's files (timeline.png) next to its data; never fails the command."""
    from lazyscope.render.plots import write_timeline

    run = load_run(run_dir)
    try:
        write_timeline(run)
    except OSError as err:
        click.echo(f"lazyscope: warning: could not write plots in {run_dir}: {err}", err=True)


@cli.command(
    "trace",
    context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": True},
)
@click.argument("target")
@click.argument("target_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="steps to run (a scenario's --steps; a script is stopped after N barriers)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="run directory (default runs/NAME-TIMESTAMP)")
@click.option("--force", is_flag=True, help="replace an existing run directory")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default="xla", show_default=True,
              help="where the program runs")
def trace_cmd(target: str, target_args: tuple[str, ...], steps: int | None, out: Path | None,
              force: bool, backend: str) -> None:
    """Run a scenario or a script under instrumentation and print its report.

    TARGET is a scenario name (see `lazyscope scenarios`) or a path to a .py script; arguments
    after it go to the scenario or script (put `--` before a script's own options).
    """
    from lazyscope.errors import Interrupted, TargetFailed
    from lazyscope.render import render_text
    from lazyscope.runner import resolve_target, trace_target

    args = list(target_args)
    if args and args[0] == "--":
        args = args[1:]
    resolved = resolve_target(target, args)
    out = out or _default_out(target)
    try:
        run = trace_target(resolved, out, backend=backend, steps=steps, force=force)
    except (TargetFailed, Interrupted):
        if (out / "meta.json").exists():
            _write_artifacts(out)
            click.echo(render_text(load_run(out)))
        raise
    _write_artifacts(out)
    click.echo(render_text(run))
    click.echo(f"run saved in {out}")


@cli.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def report_cmd(run_dir: Path, fmt: str) -> None:
    """Re-render a saved run (also writes RUN_DIR/timeline.png)."""
    from lazyscope.render import RENDERERS

    run = load_run(run_dir)
    _write_artifacts(run_dir)
    click.echo(RENDERERS[fmt](run), nl=fmt != "text")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising."""
    try:
        result = cli.main(args=argv, prog_name="lazyscope", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("lazyscope: aborted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as err:
        click.echo(f"lazyscope: {err.format_message()}", err=True)
        return err.exit_code
    except LazyscopeError as err:
        click.echo(f"lazyscope: {err}", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("lazyscope: interrupted", err=True)
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else 0


__all__ = ["RunDirError", "cli", "main"]

if __name__ == "__main__":
    sys.exit(main())
