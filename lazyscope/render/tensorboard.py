"""TensorBoard views of a saved run: scalars written from ``steps.jsonl``, and a local server.

``write_scalars(run)`` writes lazyscope's per-step series into ``RUN/tensorboard/`` (one events
file ending in ``.lazyscope``, replaced on every call so re-rendering never duplicates a series):

    lazyscope/step_time_ms        wall time of each step
    lazyscope/compilations        XLA compilations in the step
    lazyscope/compile_s           seconds spent compiling in the step
    lazyscope/execute_ms          device execution time in the step
    lazyscope/transfers_to_device / transfers_from_device   transfers in the step
    lazyscope/cumulative_wall_s   wall time from the run's start to the end of the step

The XProf profile of ``lazyscope trace --profile`` lands in the same log directory
(``plugins/profile/<time>/``), so one TensorBoard shows both.

``start_tensorboard(logdir, port)`` starts TensorBoard on 127.0.0.1 in a child process and waits
(bounded) until it answers. Uses TensorBoard's own event writer (no TensorFlow, no torch).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from lazyscope.errors import LazyscopeError, MissingDependencyError
from lazyscope.model import Run

TENSORBOARD_DIR = "tensorboard"
SCALARS_SUFFIX = ".lazyscope"
INSTALL_HINT = "TensorBoard is not installed: pip install 'lazyscope[xla]' (tensorboard, tensorboard-plugin-profile)"


def tensorboard_dir(run_dir: str | os.PathLike[str]) -> Path:
    """``RUN/tensorboard``: the run's TensorBoard log directory."""
    return Path(run_dir) / TENSORBOARD_DIR


def check_tensorboard() -> None:
    """MissingDependencyError with the install hint when TensorBoard is not importable."""
    if importlib.util.find_spec("tensorboard") is None:
        raise MissingDependencyError(INSTALL_HINT)


def scalar_series(run: Run) -> dict[str, list[tuple[int, float]]]:
    """The series written as scalars: tag -> [(step, value)]."""
    series: dict[str, list[tuple[int, float]]] = {
        "lazyscope/step_time_ms": [],
        "lazyscope/compilations": [],
        "lazyscope/compile_s": [],
        "lazyscope/execute_ms": [],
        "lazyscope/transfers_to_device": [],
        "lazyscope/transfers_from_device": [],
        "lazyscope/cumulative_wall_s": [],
    }
    total = 0.0
    for s in run.steps:
        total += s.wall_s
        series["lazyscope/step_time_ms"].append((s.index, s.wall_s * 1e3))
        series["lazyscope/compilations"].append((s.index, float(s.compile_count)))
        series["lazyscope/compile_s"].append((s.index, s.compile_s))
        series["lazyscope/execute_ms"].append((s.index, s.execute_s * 1e3))
        series["lazyscope/transfers_to_device"].append((s.index, float(s.to_device_count)))
        series["lazyscope/transfers_from_device"].append((s.index, float(s.from_device_count)))
        series["lazyscope/cumulative_wall_s"].append((s.index, total))
    return series


def write_scalars(run: Run, logdir: Path | None = None) -> Path:
    """Write the run's per-step series as TensorBoard scalars; return the events file's path."""
    check_tensorboard()
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    logdir = Path(logdir) if logdir else tensorboard_dir(run.path)
    logdir.mkdir(parents=True, exist_ok=True)
    for old in logdir.glob(f"events.out.tfevents.*{SCALARS_SUFFIX}"):
        old.unlink()
    writer = EventFileWriter(str(logdir), filename_suffix=SCALARS_SUFFIX)
    t0 = time.time()
    try:
        for tag, points in scalar_series(run).items():
            for step, value in points:
                summary = summary_pb2.Summary(
                    value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))]
                )
                writer.add_event(event_pb2.Event(wall_time=t0, step=int(step), summary=summary))
        writer.flush()
    finally:
        writer.close()
    files = sorted(logdir.glob(f"events.out.tfevents.*{SCALARS_SUFFIX}"))
    return files[-1]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_tensorboard(logdir: Path, port: int, *, timeout: float = 90.0) -> subprocess.Popen[bytes]:
    """Start TensorBoard (with every installed plugin, the profile plugin included) on
    127.0.0.1:``port`` for ``logdir``; return the process once it answers HTTP.

    Raises LazyscopeError when it exits or does not answer within ``timeout`` seconds.
    """
    check_tensorboard()
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
           "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "5"]
    log = tempfile.TemporaryFile()  # a file, not a pipe: a long-running server never blocks
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/data/plugins_listing"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            err = log.read().decode(errors="replace").strip()
            last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
            raise LazyscopeError(f"TensorBoard did not start on port {port}: {last}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    stop_tensorboard(proc)
    raise LazyscopeError(f"TensorBoard did not answer on 127.0.0.1:{port} within {timeout:.0f} s")


def stop_tensorboard(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started by :func:`start_tensorboard`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
