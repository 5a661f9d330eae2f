"""``lazyscope diff``: what changed from one run to another."""

from __future__ import annotations

from pathlib import Path

import click

from lazyscope.analyze.diff import diff_reports
from lazyscope.commands.common import RUN, report_and_views
from lazyscope.render.diff import DIFF_RENDERERS


@click.command("diff")
@click.argument("run_a", type=RUN)
@click.argument("run_b", type=RUN)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def diff_cmd(run_a: Path, run_b: Path, fmt: str) -> None:
    """What changed from RUN_A (the baseline) to RUN_B: metrics, sites, findings."""
    a = report_and_views(run_a, views=False)
    b = report_and_views(run_b, views=False)
    click.echo(DIFF_RENDERERS[fmt](diff_reports(a, b)), nl=False)
