"""Build small runs for unit tests by writing them with lazyscope's own writer.

``build_run(path, steps=[...], events=[...])`` writes a schema-2 run directory through
:class:`lazyscope.store.RunWriter` and loads it back, so a unit test exercises the writer, the
reader and the analysis on data shaped exactly like a trace's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lazyscope.model import Capabilities, Frame, Meta, Run
from lazyscope.model.steps import INTERVAL_FIELDS
from lazyscope.store import RunWriter, load_run

TORCH_BACKEND_FIELDS = ["wall_s", "t_end_s", "compile_count", "compile_s"]


def frame(file: str, line: int, function: str = "main", library: bool = False) -> Frame:
    return Frame(file, line, function, library)


def build_run(path: Path, *, backend: str = "xla", steps: list[dict[str, Any]] | None = None,
              events: list[dict[str, Any]] | None = None, info: dict[str, Any] | None = None,
              warmup_steps: int | None = None, status: str = "ok", target: str = "train.py",
              annotations: dict[int, dict[str, Any]] | None = None,
              measured: list[str] | None = None, error: str | None = None) -> Run:
    """Write and load a run. ``steps``: dicts of step fields (missing fields are NaN, except the
    time intervals, 0 as the recorder writes them: :data:`INTERVAL_FIELDS`); each
    event: ``kind``, ``step`` and optional ``seconds``, ``stack``, ``payload``, ``key``,
    ``value``."""
    caps = Capabilities() if measured is None and backend == "xla" else Capabilities(
        step_fields=measured or TORCH_BACKEND_FIELDS)
    meta = Meta(target=target, target_kind="script", backend=backend, info=dict(info or {}),
                warmup_steps=warmup_steps, capabilities=caps)
    writer = RunWriter(Path(path), meta)
    for e in events or []:
        writer.write_event(e["kind"], e.get("step", 0), seconds=e.get("seconds", 0.0),
                           stack=e.get("stack"), payload=e.get("payload"), key=e.get("key", ""),
                           value=e.get("value", 0.0))
    for i, values in enumerate(steps or []):
        writer.write_step(i, {**dict.fromkeys(INTERVAL_FIELDS, 0.0), **values},
                          annotations=(annotations or {}).get(i))
    writer.finish(status, error)
    return load_run(path)
