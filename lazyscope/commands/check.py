"""``lazyscope check``: a CI gate over a saved run's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lazyscope.analyze.baseline import baseline_unusable
from lazyscope.analyze.check import (
    Rules,
    check_graph_memory_unmeasured,
    check_report,
    check_time_unmeasured,
)
from lazyscope.commands.common import RUN, Real, Whole, hosts_option, report_and_views
from lazyscope.core.errors import EXIT_CHECK_FAILED, RunDirError, UsageError, show_path
from lazyscope.core.numbers import BadNumber, parse_float, parse_size_or_share
from lazyscope.render.check import CHECK_RENDERERS


class _Share(click.ParamType):
    """A share of the step: ``0.25`` or ``25%`` (0 to 1), through the one number parser."""

    name = "share"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            if text.endswith("%"):
                return parse_float(text[:-1], minimum=0, maximum=100) / 100
            return parse_float(text, minimum=0, maximum=1)
        except BadNumber as err:
            self.fail(f"{err} (a share: 0.25 or 25%)", param, ctx)


def _one_rule(new: int | None, old: int | None) -> int | None:
    """--max-recompiles and its old name --max-compiles-after-warmup are one rule: given both
    with different values, which one was meant is not known."""
    if new is not None and old is not None and new != old:
        raise UsageError(f"--max-recompiles {new} and --max-compiles-after-warmup {old} are one "
                         "rule (the second is the first's old name) given two limits; give one")
    return new if new is not None else old


def size_or_share_option(ctx: Any, param: Any, value: str | None
                         ) -> tuple[int | None, float | None]:
    """The value of ``--max-graph-memory`` (a command-line callback): ``(bytes, None)``,
    ``(None, share)`` or ``(None, None)`` when not given; a bad value is a usage error
    (exit 2)."""
    if value is None:
        return None, None
    return parse_size_or_share(value, "--max-graph-memory")


def tolerance_option(ctx: Any, param: Any, value: str) -> float:
    """``--tolerance``: a share, ``10%`` or ``0.1``, from 0 up to 10 (1000%); anything else is a
    usage error (exit 2)."""
    text = value.strip()
    try:
        if text.endswith("%"):
            return parse_float(text[:-1], "--tolerance", minimum=0, maximum=1000) / 100
        return parse_float(text, "--tolerance", minimum=0, maximum=10)
    except BadNumber as err:
        raise UsageError(f"{err} (a share: 10% or 0.1)") from None


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
    if (rules.max_input_share is not None or rules.max_tracing_share is not None) and \
            check_time_unmeasured(report):
        flag = "--max-input-share" if rules.max_input_share is not None else \
            "--max-tracing-share"
        raise UsageError(f"{flag} cannot be checked: {check_time_unmeasured(report)}")
    if (rules.max_graph_memory is not None or rules.max_graph_memory_share is not None) and \
            check_graph_memory_unmeasured(report, rules):
        raise UsageError(f"--max-graph-memory cannot be checked: "
                         f"{check_graph_memory_unmeasured(report, rules)}")


@click.command("check")
@click.argument("run_dir", type=RUN)
@click.option("--max-recompiles", "max_recompiles",
              type=Whole(minimum=0), default=None, metavar="N",
              help="at most N recompilations in steady state (the default rule, N=0)")
@click.option("--max-compiles-after-warmup", "max_recompiles_old",
              type=Whole(minimum=0), default=None, metavar="N", hidden=True,
              help="the old name of --max-recompiles")
@click.option("--warmup-steps", type=Whole(minimum=0), default=None, metavar="N",
              help="steady state starts at step N: every compilation from there on counts")
@click.option("--max-syncs-per-step", type=Whole(minimum=0), default=None, metavar="N",
              help="at most N host syncs in any step")
@click.option("--no-barrier-loops", is_flag=True,
              help="no loop that ends no step (a default rule)")
@click.option("--no-memory-findings", is_flag=True,
              help="no lost aliasing and no growing memory (a default rule)")
@click.option("--no-fallbacks", is_flag=True, help="no CPU-fallback op may run")
@click.option("--no-graph-breaks", is_flag=True, help="no torch.compile graph break")
@click.option("--no-rank-divergence", is_flag=True,
              help="a multi-process run's ranks compile the same graphs at the same pace")
@click.option("--max-step-seconds", type=Real(above=0, infinite=True), default=None,
              metavar="S", help="no steady step may take longer than S seconds")
@click.option("--max-input-share", type=_Share(), default=None, metavar="SHARE",
              help="the steady step may wait for its data at most SHARE of its time (0.1 or "
                   "10%: XProf's input-bound threshold)")
@click.option("--max-tracing-share", type=_Share(), default=None, metavar="SHARE",
              help="the steady step may spend at most SHARE of its time on the host's own work "
                   "(tracing, on XLA)")
@click.option("--allow-incomplete", is_flag=True,
              help="check a failed, interrupted or killed run's recorded steps instead of failing")
@click.option("--max-graph-memory", default=None, metavar="SIZE", callback=size_or_share_option,
              help="no compiled graph may hold more than SIZE on the device (1MB, 16GiB, or "
                   "80% of the device where the runtime reports its memory)")
@click.option("--baseline", type=RUN, default=None, metavar="BASE",
              help="fail when compilations, host syncs or graph executions per step rose "
                   "against BASE's, or the steady step's CPU time, or its wall time on a "
                   "machine not loaded by others (beyond both runs' spread and --tolerance)")
@click.option("--tolerance", default="10%", show_default=True, metavar="SHARE",
              callback=tolerance_option,
              help="with --baseline: how much more time per step than BASE's passes (10% or "
                   "0.1)")
@hosts_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def check_cmd(run_dir: Path, max_recompiles: int | None, max_recompiles_old: int | None,
              warmup_steps: int | None,
              max_syncs_per_step: int | None, no_barrier_loops: bool,
              no_memory_findings: bool, no_fallbacks: bool, no_graph_breaks: bool,
              no_rank_divergence: bool, max_step_seconds: float | None,
              max_input_share: float | None, max_tracing_share: float | None,
              allow_incomplete: bool, max_graph_memory: tuple[int | None, float | None],
              baseline: Path | None, tolerance: float, hosts: int | None, fmt: str) -> int:
    """A CI gate: exit 0 when RUN_DIR obeys the rules, 1 (with the evidence) when not.

    With no rule given, checks --max-recompiles 0 --no-barrier-loops --no-memory-findings: no
    recompilation in steady state, no loop that ends no step, no lost aliasing or growing
    memory. A run that did not end ok (failed, interrupted, killed) fails unless
    --allow-incomplete.
    """

    max_recompiles = _one_rule(max_recompiles, max_recompiles_old)
    rules = Rules(max_recompiles=max_recompiles, max_syncs_per_step=max_syncs_per_step,
                  no_fallbacks=no_fallbacks, no_graph_breaks=no_graph_breaks,
                  no_rank_divergence=no_rank_divergence, max_step_seconds=max_step_seconds,
                  allow_incomplete=allow_incomplete, max_graph_memory=max_graph_memory[0],
                  max_graph_memory_share=max_graph_memory[1], max_input_share=max_input_share,
                  max_tracing_share=max_tracing_share, baseline_tolerance=tolerance,
                  no_barrier_loops=no_barrier_loops, no_memory_findings=no_memory_findings)
    report = report_and_views(run_dir, warmup_steps=warmup_steps, views=False, hosts=hosts)
    _measured_for(report, rules)
    base = (report_and_views(baseline, warmup_steps=warmup_steps, views=False)
            if baseline is not None else None)
    why = baseline_unusable(base) if base is not None else None
    if why is not None:
        raise RunDirError(f"the baseline {show_path(baseline)} cannot be compared: {why}")
    result = check_report(report, rules, baseline=base)
    click.echo(CHECK_RENDERERS[fmt](result), nl=False)
    return 0 if result.passed else EXIT_CHECK_FAILED
