"""``lazyscope compare``: one scenario under several padding policies, side by side."""

from __future__ import annotations

from pathlib import Path

import click

from lazyscope.analyze.compare import Comparison
from lazyscope.backends.runner import resolve_target
from lazyscope.commands.cases import DEFAULT_POLICIES, parse_backends, parse_policies, run_compare
from lazyscope.commands.common import (
    PROGRAM_LINE,
    LocalPath,
    Whole,
    default_out,
    misplaced_options,
    order_hint,
    program_args,
    warn,
)
from lazyscope.commands.console import CompareProgress, is_terminal, live_wanted
from lazyscope.core.errors import EXIT_TARGET_FAILED, OutputError, UsageError, one_line
from lazyscope.core.units import counted
from lazyscope.render.compare import compare_page, render_compare_text
from lazyscope.render.json import dumps
from lazyscope.render.plots import write_compare_png
from lazyscope.store import atomic_write_text
from lazyscope.store.layout import COMPARE_PNG, REPORT_HTML


@click.command("compare", context_settings=PROGRAM_LINE)
@click.argument("scenario")
@click.argument("scenario_args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@click.option("--policies", default=DEFAULT_POLICIES, show_default=True,
              help="comma-separated padding policies (bucket:B1,B2,... keeps its commas; "
              "auto: what `lazyscope advise` recommends for the scenario's own lengths)")
@click.option("--steps", type=Whole(minimum=1), default=40, show_default=True)
@click.option("--repeat", type=Whole(minimum=1), default=1, show_default=True,
              help="run every policy N times, rounds in alternating order; each row shows its "
              "median run (a busy machine's noise)")
@click.option("--backends", default=None,
              help="comma-separated backends (e.g. xla,compile): every backend x policy, one table")
@click.option("--preset", default=None,
              help="the scenario's --preset (decoder: tiny|seed; hf-gpt2: tiny|small)")
@click.option("--mode", default=None, help="the scenario's --mode (train|eval)")
@click.option("--out", type=LocalPath("the comparison directory"), default=None,
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
    extra = program_args(scenario_args)
    misplaced = misplaced_options(compare_cmd, extra, resolve_target(scenario, []))
    if preset:
        extra += ["--preset", preset]
    if mode:
        extra += ["--mode", mode]
    out = out or default_out(f"compare-{scenario}")
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
            raise UsageError(f"{err}; {order_hint('compare', misplaced, scenario)}") from None
        raise
    for name, write in ((COMPARE_PNG, lambda: write_compare_png(result, out / COMPARE_PNG)),
                        (REPORT_HTML, lambda: write_compare_html(out, result))):
        try:
            write()
        except OSError as err:
            warn([str(OutputError.from_os(err, out / name))])
        except OutputError as err:
            warn([str(err)])
    if fmt == "json":
        click.echo(dumps(result))
    else:
        click.echo("")
        click.echo(render_compare_text(result), nl=False)
        click.echo(f"comparison saved in {out} (compare.json, compare.png, report.html, one run "
                   f"per {'backend x policy' if backends else 'policy'})")
    if result.failed:  # the table says it too; the exit status's own line, on stderr
        rows = {r.policy: r for r in result.rows}
        said = "; ".join(f"{p}: {(rows[p].error or '').removeprefix('lazyscope: ')}"
                         if p in rows and rows[p].error else p for p in result.failed[:3])
        click.echo(one_line(f"lazyscope: {counted(len(result.failed), 'policy', 'policies')} "
                            f"of {len(result.rows)} failed: {said}"), err=True)
        return EXIT_TARGET_FAILED
    return 0


def write_compare_html(compare_dir: Path, result: Comparison) -> Path:
    """Write ``DIR/report.html`` for a ``lazyscope compare`` directory, with ``compare.png``
    inline; atomically. Returns its path."""
    images = {}
    png = compare_dir / COMPARE_PNG
    if png.is_file():
        images["real tokens/s per policy, and real tokens processed against wall time"] = \
            png.read_bytes()
    path = compare_dir / REPORT_HTML
    atomic_write_text(path, compare_page(result, images, where=str(compare_dir)))
    return path
