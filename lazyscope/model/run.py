"""A loaded run, and a multi-process run (one run per rank)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lazyscope.model.events import EventTable
from lazyscope.model.meta import STATUS_RUNNING, Meta
from lazyscope.model.steps import StepTable


@dataclass
class Run:
    """A loaded run."""

    path: Path
    meta: Meta
    steps: StepTable
    events: EventTable
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """False when the run never finalised its metadata (killed, or still running)."""
        return self.meta.status != STATUS_RUNNING

    @property
    def status(self) -> str:
        return self.meta.status if self.complete else "incomplete"


@dataclass
class RankedRun:
    """A multi-process run: the parent's metadata (when it wrote one) and each rank's run."""

    path: Path
    parent: Meta | None
    ranks: dict[int, Run] = field(default_factory=dict)
