"""Live alerts of ``lazyscope trace`` on real XLA:CPU: a program that starts recompiling at
step 20 of 40 (about 20 ms a step) finds the alert naming its line on its own stderr (a file,
not a terminal) while it still runs; ``--quiet`` silences it; the final report says the same."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.xla]

PROGRAM = REPO / "tests" / "programs" / "guard" / "late_recompile.py"


def trace(tmp: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path}
    err = tmp / "stderr.txt"
    with open(err, "w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "lazyscope", "trace", *options, "--out", str(tmp / "run"),
             "--force", "--no-views", str(PROGRAM), "--read-stderr-at", "35"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=fh, text=True, timeout=300)
    return proc, err.read_text()


def seen_mid_run(stdout: str) -> list[str]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("stderr at step 35: "))
    return ast.literal_eval(line.removeprefix("stderr at step 35: "))


def test_the_alert_is_on_stderr_while_the_program_runs(tmp_path: Path) -> None:
    proc, err = trace(tmp_path)
    assert proc.returncode == 0, proc.stdout + err
    line = next(i for i, t in enumerate(PROGRAM.read_text().splitlines(), 1)
                if "# the line to change" in t)
    (alert,) = seen_mid_run(proc.stdout)  # what the program read at step 35, still running
    assert alert.startswith("lazyscope: step ") and f"[recompile] {PROGRAM}:{line}: " in alert
    step = int(alert.split()[2].rstrip(":"))
    assert 20 <= step < 35
    assert "fix: " in alert and alert.count("\n") == 1  # one line
    # said once, and the final report names the same line
    assert err.count("[recompile]") == 1
    assert f"1. [recompile] {PROGRAM}:{line} " in proc.stdout


def test_quiet_silences_it(tmp_path: Path) -> None:
    proc, err = trace(tmp_path, "--quiet")
    assert proc.returncode == 0, proc.stdout + err
    assert seen_mid_run(proc.stdout) == [] and "lazyscope: step" not in err


def test_the_alert_names_the_line_that_makes_the_shape_as_the_report_does(tmp_path: Path) -> None:
    """A collate function that pads to each batch's longest: the live alert names its line (the
    loader watch's evidence, held in memory until the run ends), as the final report does, not
    the line where the tensor enters the device."""
    program = REPO / "tests" / "programs" / "pitfalls" / "collate_pad_longest.py"
    line = next(i for i, t in enumerate(program.read_text().splitlines(), 1)
                if "lazyscope-expect: recompile" in t)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "lazyscope", "trace", "--out", str(tmp_path / "run"), "--force",
         "--no-views", str(program)], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    alerts = [ln for ln in proc.stderr.splitlines() if "[recompile]" in ln]
    assert alerts and all(f"[recompile] {program}:{line}: " in a for a in alerts), alerts
    assert f"1. [recompile] {program}:{line} " in proc.stdout
