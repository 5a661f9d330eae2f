"""``lazyscope export``: a run in the formats other tools read, written atomically.

* ``perfetto``: one Chrome trace event JSON file (:mod:`lazyscope.render.perfetto`), default
  ``RUN/trace.json``;
* ``parquet`` / ``csv``: two tables, ``steps.<ext>`` and ``events.<ext>``, in a directory
  (default ``RUN``): exactly what :meth:`~lazyscope.model.Run.steps_frame` (with the tail row)
  and :meth:`~lazyscope.model.Run.events_frame` return; a multi-process run's tables have a
  ``rank`` column first. Annotations that are lists or objects are written as JSON text.
  pandas (and pyarrow for Parquet) are optional: without them, one line and exit 4.

An existing output file is replaced, as pyinstrument's and py-spy's ``-o`` do; a file that
cannot be written is one line and exit 3 (:class:`~lazyscope.core.errors.OutputError`), with nothing
half-written left behind.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lazyscope.analyze.report import Report
from lazyscope.core.errors import MissingDependencyError, OutputError, show_path
from lazyscope.model import PodRun, RankedRun, Run
from lazyscope.model.dataframes import INSTALL_HINT
from lazyscope.render.perfetto import render_perfetto
from lazyscope.store import atomic_write_text
from lazyscope.store.layout import PERFETTO_JSON
from lazyscope.store.writer import check_replaceable

FORMATS = ("perfetto", "parquet", "csv")
TABLES = ("steps", "events")


def default_out(run_dir: Path, fmt: str) -> Path:
    """Where ``fmt`` goes when ``--out`` is not given: ``RUN/trace.json``, or ``RUN``."""
    return run_dir / PERFETTO_JSON if fmt == "perfetto" else run_dir


def export_perfetto(runs: Mapping[int, tuple[Run, Report]], path: Path) -> list[Path]:
    """Write the Chrome trace of ``runs`` (rank -> run and its report) to ``path``."""
    try:
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, render_perfetto(runs))
    except OSError as err:
        raise OutputError.from_os(err, path) from None
    return [path]


def _jsonable(frame: Any) -> Any:
    """Object columns whose values are lists or dicts as JSON text (Parquet and CSV hold
    scalars)."""
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = frame[name].map(
                lambda v: json.dumps(v, default=str) if isinstance(v, (list, dict, tuple))
                else v)
    return frame


def _parquet(frame: Any, tmp: str) -> None:
    frame.to_parquet(tmp, index=False)


def _csv(frame: Any, tmp: str) -> None:
    frame.to_csv(tmp, index=False)


def _write_atomic(path: Path, write: Callable[[str], None]) -> None:
    check_replaceable(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def export_tables(target: Run | RankedRun | PodRun, fmt: str, out_dir: Path) -> list[Path]:
    """Write ``steps.<fmt>`` and ``events.<fmt>`` (``parquet`` or ``csv``) into ``out_dir``."""
    frames = {"steps": _jsonable(target.steps_frame(tail=True)),
              "events": _jsonable(target.events_frame())}
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - pandas' Parquet engine
        except ImportError:
            raise MissingDependencyError(
                f"pyarrow is not installed (pandas needs it for Parquet): {INSTALL_HINT}, or "
                "use --format csv") from None
    if os.path.lexists(out_dir) and not out_dir.is_dir():
        raise OutputError(f"{show_path(out_dir)} exists and is not a directory (the tables are "
                          "written into one)")
    paths = []
    for name in TABLES:
        path = out_dir / f"{name}.{fmt}"
        frame = frames[name]
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            if fmt == "parquet":
                _write_atomic(path, functools.partial(_parquet, frame))
            else:
                _write_atomic(path, functools.partial(_csv, frame))
        except OSError as err:
            raise OutputError.from_os(err, path) from None
        paths.append(path)
    return paths
