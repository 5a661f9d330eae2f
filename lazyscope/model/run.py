"""A loaded run, and a multi-process run (one run per rank); each can show itself as pandas
DataFrames (:mod:`lazyscope.model.dataframes`: pandas is imported only then)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyscope.model.dataframes import events_frame, pandas, steps_frame
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
    #: who writes the run now, when a live trace still does (``pid 1234 (host)``): what was
    #: loaded is the run so far
    written_by: str | None = None

    @property
    def complete(self) -> bool:
        """False when the run never finalised its metadata (killed, or still running)."""
        return self.meta.status != STATUS_RUNNING

    @property
    def status(self) -> str:
        """``running`` while a live trace writes it, ``incomplete`` when its writer died before
        finalising it (killed), else how it ended."""
        if self.complete:
            return self.meta.status
        return STATUS_RUNNING if self.written_by is not None else "incomplete"

    def steps_frame(self, *, tail: bool = False) -> Any:
        """One row per step as a pandas DataFrame: ``step``, ``kind``, ``start_s``, every step
        field (nullable ``Int64``/``Float64``, ``<NA>`` where not measured) and the program's
        annotations; ``tail``: with the work after the last barrier as a last row. Needs
        pandas (``lazyscope[data]``); see :mod:`lazyscope.model.dataframes`."""
        return steps_frame(self.steps, tail=tail)

    def events_frame(self) -> Any:
        """One row per event as a pandas DataFrame: ``kind`` (categorical), ``step``,
        ``seconds``, ``value``, the user's ``file``/``line``/``function``, the ``call_stack``, and
        the payload's ``cause``, ``cause_kind``, ``owner``, ``phase``, ``op``, ``graph``,
        ``digest``. Needs pandas (``lazyscope[data]``)."""
        return events_frame(self.events)


@dataclass
class RankedRun:
    """A multi-process run: the parent's metadata (when it wrote one) and each rank's run."""

    path: Path
    parent: Meta | None
    ranks: dict[int, Run] = field(default_factory=dict)

    def steps_frame(self, *, tail: bool = False) -> Any:
        """Every rank's :meth:`Run.steps_frame`, one after another, with a ``rank`` column
        first."""
        return self._concat([(r, run.steps_frame(tail=tail)) for r, run in
                             sorted(self.ranks.items())])

    def events_frame(self) -> Any:
        """Every rank's :meth:`Run.events_frame`, one after another, with a ``rank`` column
        first."""
        return self._concat([(r, run.events_frame()) for r, run in sorted(self.ranks.items())])

    @staticmethod
    def _concat(frames: list[tuple[int, Any]], column: str = "rank") -> Any:
        pd = pandas()
        for rank, frame in frames:
            frame.insert(0, column, pd.array([rank] * len(frame), dtype="Int64"))
        if not frames:
            return pd.DataFrame()
        out = pd.concat([f for _, f in frames], ignore_index=True)
        # a category column stays one when the ranks' categories differ (concat makes it object)
        for name in frames[0][1].columns:
            if isinstance(frames[0][1][name].dtype, pd.CategoricalDtype) and \
                    not isinstance(out[name].dtype, pd.CategoricalDtype):
                out[name] = out[name].astype("category")
        return out


@dataclass
class PodRun:
    """A run that several hosts wrote to one URL (``trace --out gs://...``): each host's part
    (``host<N>/``), a run or a multi-process run of its own."""

    path: Path
    hosts: dict[int, Run | RankedRun] = field(default_factory=dict)
    #: the name the user gave it (the URL)
    name: str = ""
    #: how many hosts each host's uploader said the pod has, and where it read that (its
    #: launcher's ``TPU_WORKER_HOSTNAMES`` ...): ``{host: (hosts, source)}``
    declared: dict[int, tuple[int, str]] = field(default_factory=dict)
    #: every host that put anything in the bucket (a part whose first upload never completed
    #: too)
    seen: set[int] = field(default_factory=set)

    def steps_frame(self, *, tail: bool = False) -> Any:
        """Every host's :meth:`Run.steps_frame` (a multi-process host's with its ``rank``
        column), one after another, with a ``host`` column first."""
        return RankedRun._concat([(h, part.steps_frame(tail=tail)) for h, part in
                                  sorted(self.hosts.items())], "host")

    def events_frame(self) -> Any:
        """Every host's :meth:`Run.events_frame`, one after another, with a ``host`` column
        first."""
        return RankedRun._concat([(h, part.events_frame()) for h, part in
                                  sorted(self.hosts.items())], "host")

    @property
    def warnings(self) -> list[str]:
        """What each host's run files lost, named by host (and rank)."""
        out = []
        for host, part in sorted(self.hosts.items()):
            runs = part.ranks if isinstance(part, RankedRun) else {None: part}
            out += [f"host {host}" + (f" rank {r}" if r is not None else "") + f": {w}"
                    for r, run in sorted(runs.items(), key=lambda kv: kv[0] or 0)
                    for w in run.warnings]
        return out


def runs_by_rank(target: Run | RankedRun | PodRun) -> dict[int, Run]:
    """``{rank: run}``: each rank of a multi-process run, or a single run under its own rank
    (0 when it was not one of several); a pod's hosts by host index (a host of several ranks:
    its lowest rank's run)."""
    if isinstance(target, PodRun):
        out: dict[int, Run] = {}
        for host, part in sorted(target.hosts.items()):
            runs = runs_by_rank(part)
            out[host] = runs[min(runs)]
        return out
    if isinstance(target, RankedRun):
        return dict(sorted(target.ranks.items()))
    return {target.meta.rank if target.meta.rank is not None else 0: target}
