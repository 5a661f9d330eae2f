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


# ---- compare and advise (issue 3) -------------------------------------------------------


@cli.command(
    "compare",
    context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": True},
)
@click.argument("scenario")
@click.argument("scenario_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--policies", default="max,longest,pow2,bucket:auto,packed", show_default=True,
              help="comma-separated padding policies (bucket:B1,B2,... keeps its commas)")
@click.option("--steps", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--preset", default=None, help="the scenario's --preset (tiny|seed)")
@click.option("--mode", default=None, help="the scenario's --mode (train|eval)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="comparison directory (default runs/compare-SCENARIO-TIMESTAMP)")
@click.option("--force", is_flag=True, help="replace an existing comparison directory")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def compare_cmd(scenario: str, scenario_args: tuple[str, ...], policies: str, steps: int,
                preset: str | None, mode: str | None, out: Path | None, force: bool,
                fmt: str) -> int:
    """Run SCENARIO once per padding policy (each in a fresh process) and compare them.

    Writes OUT/<policy>/ (a run directory each), OUT/compare.json and OUT/compare.png.
    Arguments after SCENARIO go to the scenario (e.g. --batching grouped).
    """
    import json as _json

    from lazyscope.compare import parse_policies, run_compare
    from lazyscope.errors import EXIT_TARGET_FAILED
    from lazyscope.render.compare import COMPARE_PNG, render_compare_text, write_compare_png

    extra = list(scenario_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if preset:
        extra += ["--preset", preset]
    if mode:
        extra += ["--mode", mode]
    out = out or _default_out(f"compare-{scenario}")
    result = run_compare(scenario, parse_policies(policies), steps=steps, out=out, extra=extra,
                         force=force, progress=lambda line: click.echo(line, err=fmt == "json"))
    try:
        write_compare_png(result, out / COMPARE_PNG)
    except OSError as err:
        click.echo(f"lazyscope: warning: could not write {out / COMPARE_PNG}: {err}", err=True)
    if fmt == "json":
        click.echo(_json.dumps(result, indent=2))
    else:
        click.echo("")
        click.echo(render_compare_text(result), nl=False)
        click.echo(f"comparison saved in {out} (compare.json, compare.png, one run per policy)")
    return EXIT_TARGET_FAILED if result["failed"] else 0


@cli.command("advise")
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@click.option("--lengths", "lengths_path", type=click.Path(path_type=Path), default=None,
              help="a file of sequence lengths, one per line (instead of RUN_DIR)")
@click.option("--max-buckets", type=int, default=8, show_default=True, help="largest K to try")
@click.option("--horizon", type=int, default=None,
              help="steps to plan for (default: the run's steps, or the file's batches)")
@click.option("--batch", type=int, default=8, show_default=True, help="batch size (--lengths)")
@click.option("--max-len", type=int, default=None, help="max length (--lengths; default longest)")
@click.option("--grouped", is_flag=True, help="batches formed inside buckets (--lengths)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def advise_cmd(run_dir: Path | None, lengths_path: Path | None, max_buckets: int,
               horizon: int | None, batch: int, max_len: int | None, grouped: bool,
               fmt: str) -> None:
    """Exact bucket boundaries for a run's (or a file's) length histogram, per K."""
    import json as _json

    from lazyscope.analyze.buckets import advice_for_run, advise
    from lazyscope.compare import read_lengths_file
    from lazyscope.errors import UsageError
    from lazyscope.render.compare import render_advice_text

    if (run_dir is None) == (lengths_path is None):
        raise UsageError("give either RUN_DIR or --lengths FILE")
    if max_buckets < 1:
        raise UsageError(f"--max-buckets must be at least 1, got {max_buckets}")
    if horizon is not None and horizon < 1:
        raise UsageError(f"--horizon must be at least 1, got {horizon}")
    if batch < 1:
        raise UsageError(f"--batch must be at least 1, got {batch}")
    if run_dir is not None:
        advice = advice_for_run(load_run(run_dir), max_buckets=max_buckets, horizon=horizon)
        if advice is None:
            raise UsageError(
                f"{run_dir} has no per-step seq_len/batch_max_len annotations to advise on "
                "(trace the decoder scenario, or use --lengths FILE)"
            )
    else:
        values = read_lengths_file(lengths_path)
        top = max_len or max(values)
        if max(values) > top:
            raise UsageError(f"--max-len {top} is below the longest length {max(values)}")
        try:
            advice = advise(values, batch=batch, top=top, max_buckets=max_buckets,
                            grouped=grouped, horizon=horizon)
        except ValueError as err:
            raise UsageError(str(err)) from None
    click.echo(_json.dumps(advice, indent=2) if fmt == "json" else render_advice_text(advice),
               nl=fmt == "json")


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
