"""TensorBoard views of a saved run: its report's per-step series as scalars.

``write_scalars(report, logdir)`` writes lazyscope's per-step series into ``RUN/tensorboard/``
(one events file ending in ``.lazyscope``, replaced on every call so re-rendering never
duplicates a series; a long run's series is bucketed like the plots):

    lazyscope/step_time_ms        wall time of each step
    lazyscope/compilations        compilations in the step
    lazyscope/compile_s           seconds spent compiling in the step
    lazyscope/execute_ms          device execution time in the step
    lazyscope/transfers_to_device / transfers_from_device   transfers in the step
    lazyscope/cumulative_wall_s   wall time from the run's start to the end of the step

Counts (compilations, transfers) are integers: TensorBoard draws every scalar smoothed by
default (0.6, a setting of the page only: no event or summary field changes it), which turns
0, 0, 1, 0 into fractions. So the same events file also holds a text summary,
``lazyscope/per_step_counts``: a table of the counts per step (every step of a short run, the
steps with something to count of a long one) that the Text tab shows as numbers; and
:func:`lazyscope.commands.tensorboard.urls` gives the links ``lazyscope tensorboard`` prints, which open the scalars with
smoothing 0 (``?smoothing=0#timeseries``; the legacy dashboard: ``#scalars&_smoothingWeight=0``).

The XProf profile of ``lazyscope trace --profile`` lands in the same log directory
(``plugins/profile/<time>/``), so one TensorBoard shows both.

Uses TensorBoard's own event writer (no TensorFlow, no torch).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lazyscope.analyze.memory import MAX_DEVICE_POINTS
from lazyscope.analyze.report import Report
from lazyscope.core.errors import MissingDependencyError
from lazyscope.store.layout import TENSORBOARD_DIR

SCALARS_SUFFIX = ".lazyscope"


INSTALL_HINT = "TensorBoard is not installed: pip install 'lazyscope[xla]' (tensorboard, tensorboard-plugin-profile)"


def check_tensorboard() -> None:
    """MissingDependencyError with the install hint when TensorBoard is not importable."""
    if importlib.util.find_spec("tensorboard") is None:
        raise MissingDependencyError(INSTALL_HINT)


def tensorboard_dir(run_dir: str | os.PathLike[str]) -> Path:
    """``RUN/tensorboard``: the run's TensorBoard log directory."""
    return Path(run_dir) / TENSORBOARD_DIR


def scalar_series(report: Report) -> dict[str, list[tuple[int, float]]]:
    """The series written as scalars: tag -> [(step, value)]. A long run's series is bucketed
    (each point at its bucket's first step, the bucket's mean time or sum of counts)."""
    series = report.series
    if series is None:  # a report loaded from JSON has no view series
        return {}
    per = series.size
    out: dict[str, list[tuple[int, float]]] = {
        "lazyscope/step_time_ms": list(zip(series.step.tolist(),
                                           (series.wall_mean * 1e3).tolist(), strict=True)),
        "lazyscope/compilations": list(zip(series.step.tolist(), series.compiles.tolist(),
                                           strict=True)),
        "lazyscope/compile_s": list(zip(series.step.tolist(), series.compile_s.tolist(),
                                        strict=True)),
        "lazyscope/cumulative_wall_s": list(zip(series.step.tolist(),
                                                series.cumulative_s.tolist(), strict=True)),
    }
    if series.execute_s is not None:
        out["lazyscope/execute_ms"] = list(zip(series.step.tolist(),
                                               (series.execute_s / per * 1e3).tolist(),
                                               strict=True))
    steps = report.steps
    for tag, field in (("lazyscope/transfers_to_device", "to_device_count"),
                       ("lazyscope/transfers_from_device", "from_device_count")):
        col = steps.col(field)
        if col is not None and not series.bucketed:
            out[tag] = list(zip(series.step.tolist(), col.tolist(), strict=True))
    if series.parts is not None:  # where each step's time went (the step anatomy)
        for part, values in series.parts.items():
            name = series.host_label if part == "host" else part
            out[f"lazyscope/time/{name}_ms"] = list(zip(series.step.tolist(),
                                                        (values / per * 1e3).tolist(),
                                                        strict=True))
    out.update(device_memory_series(report))
    return out


def device_memory_series(report: Report) -> dict[str, list[tuple[int, float]]]:
    """The device's memory per step, in bytes, where the runtime reported it (TPU: bytes in
    use at each step's barrier; CUDA: torch's allocator, in use and the step's peak, and
    reserved); nothing where it was not measured (XLA:CPU, a backend that cannot say), never 0.
    A series downsampled in the report (past its points) sits at each point's first step."""
    mem = report.memory
    dev = mem.device if mem is not None else None
    if dev is None:
        return {}
    out: dict[str, list[tuple[int, float]]] = {}
    every = max(1, -(-dev.steps // MAX_DEVICE_POINTS))  # as the report downsampled them
    for tag, values in (("lazyscope/device_memory_used_bytes", dev.used),
                        ("lazyscope/device_memory_step_peak_bytes", dev.step_peaks),
                        ("lazyscope/device_memory_reserved_bytes", dev.reserved)):
        if values:
            out[tag] = [(i * every, float(v)) for i, v in enumerate(values)]
    return out


#: rows of the per-step counts table; a longer run lists the steps that have something to count
MAX_COUNT_ROWS = 200
COUNTS_TAG = "lazyscope/per_step_counts"


def _count(value: float) -> str:
    return str(int(value)) if value == value else "-"  # NaN: not measured in that step


def count_table(report: Report) -> str:
    """The per-step counts as a markdown table (TensorBoard's Text tab renders it): step,
    compilations, executions, transfers to and from the device, host syncs, CPU-fallback
    executions (the columns the backend measures)."""
    steps = report.steps
    n = len(steps)
    measured = [(title, steps.col(field)) for title, field in (
        ("compilations", "compile_count"), ("executions", "execute_count"),
        ("to device", "to_device_count"), ("from device", "from_device_count"))]
    measured.append(("host syncs", report.syncs_per_step))
    measured.append(("CPU fallbacks", steps.col("fallback_count")))
    columns = [(title, col) for title, col in measured if col is not None and len(col) == n]
    head = "| step | " + " | ".join(t for t, _ in columns) + " |\n|---:|" + "---:|" * len(columns)
    rows = list(range(n))
    note = ""
    if n > MAX_COUNT_ROWS:
        worth = {"compilations", "from device", "host syncs", "CPU fallbacks"}
        listed = np.zeros(n, dtype=bool)
        for title, col in columns:
            if title in worth:  # not 0 (NaN, not measured in that step, is listed too)
                listed |= np.asarray(col, dtype=float) != 0
        rows = np.flatnonzero(listed).tolist()
        note = (f"{n} steps; listed: the {min(len(rows), MAX_COUNT_ROWS)} first steps that "
                "compiled, read from the device, synced or fell back to the CPU "
                f"(`lazyscope report {report.run_dir}` has every step)\n\n")
        rows = rows[:MAX_COUNT_ROWS]
    body = "\n".join("| " + " | ".join([str(i), *[_count(col[i]) for _, col in columns]])
                     + " |" for i in rows)
    return note + head + ("\n" + body if body else "")


class _Records:
    """TensorBoard's record framing (``RecordWriter``: the length, the masked CRC-32C of the
    length, the data, the masked CRC-32C of the data) with google-crc32c's CRC in C, where
    TensorBoard without TensorFlow computes it in Python (0.13 s of a 10^6-step run's 0.19 s
    of scalars)."""

    def __init__(self, f: Any, crc: Callable[[bytes], int]):
        self._f, self._crc = f, crc

    def _masked(self, data: bytes) -> bytes:
        x = self._crc(data)
        return struct.pack("<I", (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF)

    def write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._f.write(header + self._masked(header) + data + self._masked(data))


def _record_writer(f: Any) -> Any:
    """A writer of TensorBoard's records into ``f``: google-crc32c's when it is installed."""
    try:
        import google_crc32c
    except ImportError:
        from tensorboard.summary.writer.record_writer import RecordWriter

        return RecordWriter(f)
    return _Records(f, google_crc32c.value)


def text_summary(tag: str, text: str, description: str) -> Any:
    """The Summary of TensorBoard's ``text_pb(tag, text, description=...)``, byte for byte,
    built from its protos: ``tensorboard.plugins.text.summary_v2`` imports TensorBoard's
    TensorFlow stub (0.1 s, a tenth of a 10^6-step HTML report) to make one string tensor."""
    from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.plugins.text import metadata

    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING,
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                    string_val=[text.encode("utf-8")])
    summary = summary_pb2.Summary()
    summary.value.add(tag=tag, tensor=tensor, metadata=metadata.create_summary_metadata(
        display_name=None, description=description))
    return summary


def remove_scalars(logdir: Path) -> None:
    """Remove the scalars lazyscope wrote into ``logdir`` before (its events files only)."""
    for old in Path(logdir).glob(f"events.out.tfevents.*{SCALARS_SUFFIX}"):
        old.unlink()


def write_scalars(report: Report, logdir: Path) -> Path:
    """Write the report's per-step series as TensorBoard scalars into ``logdir``; return the
    events file's path."""
    check_tensorboard()
    from tensorboard.compat.proto import event_pb2, summary_pb2

    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    remove_scalars(logdir)
    t0 = time.time()
    # TensorBoard's EventFileWriter writes from a thread of its own, whose OSError (a full
    # disk) is printed as a traceback: the same records are written here, in this thread,
    # so a failure is one OSError for the caller
    path = logdir / (f"events.out.tfevents.{int(t0):010d}.{socket.gethostname()}."
                     f"{os.getpid()}.0{SCALARS_SUFFIX}")
    with open(path, "wb") as f:
        records = _record_writer(f)
        records.write(event_pb2.Event(
            wall_time=t0, file_version="brain.Event:2",
            source_metadata=event_pb2.SourceMetadata(writer="lazyscope")).SerializeToString())
        for tag, points in scalar_series(report).items():
            for step, value in points:
                summary = summary_pb2.Summary(
                    value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))]
                )
                records.write(event_pb2.Event(wall_time=t0, step=int(step),
                                              summary=summary).SerializeToString())
        counts = text_summary(COUNTS_TAG, count_table(report),
                              "lazyscope's integer series per step, unsmoothed")
        records.write(event_pb2.Event(wall_time=t0, step=0, summary=counts).SerializeToString())
        f.flush()
    return path


