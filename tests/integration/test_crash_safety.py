"""Crash safety on real torch_xla: SIGKILL keeps every finished step, Ctrl-C finalises the run as
``interrupted`` (exit 130), a script that raises leaves ``failed`` (exit 5).

Synchronisation is by marker file, not by sleeping: the traced script writes the marker right
after its k-th ``torch_xla.sync()`` returned (by then lazyscope has written and flushed step k-1,
the k-th step) and then blocks until the test acts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.xla, pytest.mark.slow]

SCRIPT = '''
import os, sys, time
import torch
import torch_xla

k = int(os.environ["LS_AFTER"])
marker = os.environ["LS_MARKER"]
action = os.environ["LS_ACTION"]          # block | raise
dev = torch_xla.device()
x = torch.ones(16, 16, device=dev)
for i in range(1000):
    x = (x @ x) * 0.01 + 1.0
    torch_xla.sync()
    if i + 1 == k:
        if action == "raise":
            raise ValueError(f"bad batch at step {i}")
        with open(marker + ".tmp", "w") as fh:
            fh.write(str(i))
        os.replace(marker + ".tmp", marker)
        while True:                      # block until the test kills or interrupts us
            time.sleep(0.05)
'''


def _start(tmp_path: Path, k: int, action: str) -> tuple[subprocess.Popen[str], Path, Path]:
    script = tmp_path / "train_loop.py"
    script.write_text(SCRIPT)
    out, marker = tmp_path / "run", tmp_path / "marker"
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO), "LS_AFTER": str(k),
           "LS_MARKER": str(marker), "LS_ACTION": action}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lazyscope", "trace", "--out", str(out), str(script)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, out, marker


def _wait_for(marker: Path, proc: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"traced process exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("marker never appeared")
        time.sleep(0.02)


@pytest.mark.parametrize("k", [3])
def test_sigkill_keeps_exactly_the_finished_steps(tmp_path, k) -> None:
    proc, out, marker = _start(tmp_path, k, "block")
    _wait_for(marker, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "running"  # nobody finalised it: the loader must cope
    report = report_json(out)
    assert report["steps"] == k
    assert report["status"] == "incomplete" and report["complete"] is False
    assert report["verdict"].startswith(f"incomplete run ({k} finished steps)")
    assert [s["step"] for s in report["per_step"]] == list(range(k))
    assert report["compiles"] >= 1  # the first step's compilation was kept
    text = lazyscope_cmd("report", str(out))
    assert text.returncode == 0 and "status      incomplete" in text.stdout
    check = lazyscope_cmd("check", str(out))
    assert check.returncode == 1 and "FAIL run-status: the run is incomplete" in check.stdout


def test_ctrl_c_finalises_interrupted(tmp_path) -> None:
    k = 2
    proc, out, marker = _start(tmp_path, k, "block")
    _wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines() == [
        f"lazyscope: interrupted; the run so far is kept in {out} (status interrupted)"
    ]
    assert "status      interrupted: interrupted by the user (Ctrl-C)" in stdout
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["ended_at"]
    assert report_json(out)["steps"] == k


def test_script_that_raises_is_failed_exit_5(tmp_path) -> None:
    k = 2
    proc, out, _ = _start(tmp_path, k, "raise")
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 5, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    script = tmp_path / "train_loop.py"
    raise_line = SCRIPT.splitlines().index('            raise ValueError(f"bad batch at step {i}")') + 1
    assert lines[0] == (
        f"lazyscope: {script} failed: ValueError: bad batch at step 1 "
        f"(at {script}:{raise_line}); the run so far is kept in {out} (status failed)"
    )
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and "ValueError: bad batch at step 1" in meta["error"]
    # the line it raised at, recorded for a report to name (a pod's "stopped" finding)
    assert meta["info"]["error_site"] == {"file": str(script), "line": raise_line,
                                          "function": "<module>"}
    assert "Traceback" in (out / "error.txt").read_text()  # the full traceback is kept on disk
    report = report_json(out)
    assert report["steps"] == k and report["status"] == "failed"
