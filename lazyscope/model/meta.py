"""What ran and how it ended (``meta.json``): :class:`Meta`, the statuses, and what the backend
measures (:class:`Capabilities`)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from lazyscope.model.info import RunInfo, run_info
from lazyscope.model.payloads import EVENT_KINDS
from lazyscope.model.steps import STEP_FIELDS

#: 3: steps.bin records hold the step's time intervals (input, barrier, syncs, lazyscope's own)
SCHEMA_VERSION = 3

STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
#: the disk filled while the run was written: what was recorded before is kept
STATUS_NO_SPACE = "no_space"
STATUSES = (STATUS_RUNNING, STATUS_OK, STATUS_FAILED, STATUS_INTERRUPTED, STATUS_NO_SPACE)


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Capabilities:
    """What a backend measures and how it runs programs, declared by the backend; the analyzers
    branch on these, never on the backend's name.

    ``step_fields``: the step fields it fills; ``events``: the event kinds it can emit;
    ``unmeasured``: a sentence for each thing it cannot see (shown in reports); ``lazy``: every
    step runs compiled graphs (XLA), as opposed to code that compiles only where the program
    asks for it (``torch.compile``)."""

    step_fields: list[str] = field(default_factory=lambda: list(STEP_FIELDS))
    events: list[str] = field(default_factory=lambda: list(EVENT_KINDS))
    unmeasured: list[str] = field(default_factory=list)
    #: None: not declared (a run recorded before lazyscope 0.3): set from the backend when the
    #: run's metadata is built
    lazy: bool | None = None

    @classmethod
    def json_upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Runs before lazyscope 0.3 said ``notes`` for what the backend cannot see (and every
        XLA run was lazy: set from the backend in :class:`Meta`); what is not the recorded
        shape reads as not declared."""
        if "unmeasured" not in data and "notes" in data:
            data["unmeasured"] = data.pop("notes")
        if isinstance(data.get("step_fields"), list):
            data["step_fields"] = [str(f) for f in data["step_fields"] if f in STEP_FIELDS]
        for key in ("events", "unmeasured"):
            if isinstance(data.get(key), list):
                data[key] = [str(v) for v in data[key]]
            else:
                data.pop(key, None)
        if not isinstance(data.get("lazy"), bool):
            data.pop("lazy", None)
        return data


@dataclass
class Meta:
    """What ran and how it ended (``meta.json``)."""

    target: str = ""
    target_kind: str = "scenario"  # scenario | script | api
    args: list[str] = field(default_factory=list)
    backend: str = "xla"
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str | None = None
    status: str = STATUS_RUNNING
    error: str | None = None
    steps_requested: int | None = None
    #: a fixed warm-up given by the user (``--warmup-steps``); None: warm-up is found by the
    #: analysis (a graph's first compile at a new site or phase is never a recompile)
    warmup_steps: int | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: this process's rank in a multi-process run, and how many ranks there are
    rank: int | None = None
    world_size: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def json_upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """What older writers and programs put in ``meta.json`` that still reads: arguments
        that are not strings, a missing or odd ``info``, ``versions`` or ``capabilities``. A
        field of the wrong type otherwise is corruption (ValueError naming it)."""
        args = data.get("args", [])
        data["args"] = [str(a) for a in (args if isinstance(args, list) else [args])]
        for key in ("info", "versions", "capabilities"):
            if not isinstance(data.get(key), dict):
                data.pop(key, None)
        if "versions" in data:
            data["versions"] = {str(k): str(v) for k, v in data["versions"].items()}
        return data

    def __post_init__(self) -> None:
        if self.capabilities.lazy is None:  # a run from before lazyscope 0.3: XLA is lazy
            self.capabilities.lazy = self.backend == "xla"

    @property
    def run_info(self) -> RunInfo:
        """``info`` decoded: lazyscope's keys, the workload, the program's own
        (:mod:`lazyscope.model.info`)."""
        return run_info(self.info)

    @property
    def program_notes(self) -> list[str]:
        """Lines the program and the backend noted about the run as it ran (``lazyscope.note``,
        ``info["notes"]``)."""
        return [str(n) for n in self.run_info.notes]
