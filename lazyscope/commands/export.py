"""``lazyscope export``: a saved run in a format other tools read (Perfetto, parquet, csv)."""

from __future__ import annotations

from pathlib import Path

import click

from lazyscope.analyze.report import build_report
from lazyscope.commands.common import RUN, URLS, LocalPath, Whole, warn
from lazyscope.core.errors import UsageError
from lazyscope.model import PodRun, RankedRun, runs_by_rank
from lazyscope.render.export import FORMATS as EXPORT_FORMATS
from lazyscope.render.export import default_out as export_default_out
from lazyscope.render.export import export_perfetto, export_tables
from lazyscope.store import load_target


@click.command("export")
@click.argument("run_dir", type=RUN)
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="perfetto",
              show_default=True,
              help="perfetto: a Chrome trace JSON (ui.perfetto.dev, chrome://tracing, "
              "vizviewer); parquet, csv: steps and events tables (pandas)")
@click.option("--out", type=LocalPath("the exported file or directory"), default=None,
              help="perfetto: the file (default RUN_DIR/trace.json); parquet, csv: the "
              "directory of steps.EXT and events.EXT (default RUN_DIR)")
@click.option("--warmup-steps", type=Whole(minimum=0), default=None, metavar="N",
              help="perfetto: the findings marked on events count every compilation from "
              "step N on")
def export_cmd(run_dir: Path, fmt: str, out: Path | None, warmup_steps: int | None) -> None:
    """Write a saved run in a format other tools read; prints the paths written.

    A multi-process run is one file: a process (track group) per rank in the trace, a rank
    column in the tables."""

    url = URLS.get(Path(run_dir))
    if url is not None and out is None:  # never into lazyscope's download cache
        raise UsageError(f"{url} is a run at a URL: give --out, the file or directory to write "
                         "on this machine")
    target = load_target(run_dir)
    # what the run's files lost is said here too: an export of a damaged run is not silent
    if isinstance(target, PodRun):
        warn(target.warnings)
    else:
        ranked = target.ranks if isinstance(target, RankedRun) else {None: target}
        warn([(f"rank {rank}: " if rank is not None else "") + w
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
