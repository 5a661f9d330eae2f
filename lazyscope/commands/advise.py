"""``lazyscope advise``: which padding policy wins on a run's data, and the code to paste."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lazyscope.analyze.buckets import DEFAULT_HORIZON
from lazyscope.commands.cases import advise_target
from lazyscope.commands.common import RUN, LocalPath, Whole
from lazyscope.core.errors import UsageError
from lazyscope.core.numbers import parse_size
from lazyscope.core.padding import MAX_BATCH, MAX_LENGTH
from lazyscope.render.advice import render_advice_json, render_advice_text, render_emit


def size_option(ctx: Any, param: Any, value: str | None) -> int | None:
    """``--device-memory SIZE`` in bytes (a command-line callback); a bad size is a usage
    error (exit 2)."""
    if value is None:
        return None
    size = parse_size(value, "--device-memory")
    if size <= 0:
        raise UsageError(f"--device-memory: {value!r} is no memory at all")
    return size


@click.command("advise")
@click.argument("run_dir", type=RUN, required=False)
@click.option("--lengths", "lengths_path", type=LocalPath("a lengths file"), default=None,
              help="a file of sequence lengths, one per line (instead of RUN_DIR)")
@click.option("--horizon", type=Whole(minimum=1), default=None, metavar="STEPS",
              help=f"steps of your run to plan for (default {DEFAULT_HORIZON:,}: a long "
              "training run; compilation weighs more in a short one)")
@click.option("--max-buckets", type=Whole(minimum=1), default=8, show_default=True,
              help="largest K to try")
@click.option("--batch", type=Whole(1, MAX_BATCH), default=None,
              help="sequences per batch, with --lengths (default 8; a run says its own)")
@click.option("--max-len", type=Whole(1, MAX_LENGTH), default=None,
              help="the longest length a batch may hold (default: the run's max_len, else "
              "the longest seen)")
@click.option("--grouped", is_flag=True, help="batches formed inside buckets (--lengths)")
@click.option("--no-model-changes", is_flag=True,
              help="leave out policies the model must change for (packed rows need a "
              "document mask or position_ids)")
@click.option("--compare", "compare_dir", type=RUN, default=None,
              help="a `lazyscope compare` directory of the same workload: its measured numbers "
              "beside the predicted ones (default: the comparison RUN_DIR belongs to)")
@click.option("--device-memory", "device_memory", default=None, metavar="SIZE",
              callback=size_option,
              help="the device memory a graph may hold (1MB, 16GiB): the policies whose "
              "largest graph would not fit are ruled out (predicted from RUN_DIR's own graphs)")
@click.option("--emit", is_flag=True,
              help="print the code to paste for the recommended policy (lazyscope.data)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def advise_cmd(run_dir: Path | None, lengths_path: Path | None, horizon: int | None,
               max_buckets: int, batch: int | None, max_len: int | None, grouped: bool,
               no_model_changes: bool, compare_dir: Path | None, device_memory: int | None,
               emit: bool, fmt: str) -> None:
    """Which padding policy processes RUN_DIR's data fastest, end to end: pad to max, K exact
    buckets, a length-grouped sampler or packed rows, ranked by predicted real tokens/s over
    your run, calibrated on RUN_DIR's own compile and execute seconds.

    RUN_DIR is any traced run (the lengths come from its graphs' varying dimension, or from its
    annotations), or a `lazyscope compare` directory (measured numbers beside the predicted
    ones). --emit prints the lines to paste. Each policy's largest graph is predicted from
    RUN_DIR's own compiled graphs; --device-memory SIZE rules out those that would not fit.
    """
    advice = advise_target(run_dir, lengths_file=lengths_path, max_buckets=max_buckets,
                           horizon=horizon, batch=batch, max_len=max_len, grouped=grouped,
                           packing=not no_model_changes, compare_dir=compare_dir,
                           device_memory=device_memory)
    if emit:
        click.echo(render_emit(advice), nl=False)
        return
    click.echo(render_advice_json(advice) if fmt == "json" else render_advice_text(advice),
               nl=False)
