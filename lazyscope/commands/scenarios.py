"""``lazyscope scenarios``: the built-in workloads."""

from __future__ import annotations

import click

from lazyscope.backends.runner import SCENARIOS


@click.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    width = max(len(n) for n in SCENARIOS)
    for name, info in sorted(SCENARIOS.items()):
        click.echo(f"{name:<{width}}  {info.description}")
