"""``lazyscope report``: re-render a saved run (text, JSON, HTML and its views)."""

from __future__ import annotations

from pathlib import Path

import click

from lazyscope.commands.common import RUN, Whole, echo_as_is, hosts_option, report_and_views
from lazyscope.render import RENDERERS, render_text
from lazyscope.store.layout import COMPARE_JSON, META_FILE, REPORT_HTML


@click.command("report")
@click.argument("run_dir", type=RUN)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="html writes RUN_DIR/report.html and prints its path")
@click.option("--warmup-steps", type=Whole(minimum=0), default=None, metavar="N",
              help="count every compilation from step N on as a recompilation")
@hosts_option
def report_cmd(run_dir: Path, fmt: str, warmup_steps: int | None, hosts: int | None) -> None:
    """Re-render a saved run as text or json, or write its views (--format html:
    RUN_DIR/report.html with the plots inline, the PNGs, the TensorBoard scalars)."""

    if fmt == "html" and (run_dir / COMPARE_JSON).is_file() and not (run_dir / META_FILE).exists():

        # a `lazyscope compare` directory
        from lazyscope.commands.cases import load_comparison
        from lazyscope.commands.compare import write_compare_html

        click.echo(str(write_compare_html(run_dir, load_comparison(run_dir))))
        return
    report = report_and_views(run_dir, warmup_steps=warmup_steps, views=fmt == "html",
                               need_html=fmt == "html", hosts=hosts)
    if fmt == "html":
        click.echo(str(run_dir / REPORT_HTML))
        return
    if fmt == "text":
        from lazyscope.commands.console import colour_wanted, print_report

        print_report(render_text(report), clean=report.clean, colour=colour_wanted(),
                     echo=echo_as_is)
        return
    click.echo(RENDERERS[fmt](report))
