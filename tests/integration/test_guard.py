"""``lazyscope.guard()`` on real torch_xla (XLA:CPU) and real torch.compile, each case in a fresh
process (torch_xla's compile cache lives as long as the process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.xla]

PROGRAMS = REPO / "tests" / "programs" / "guard"
LATE = PROGRAMS / "late_recompile.py"
COMPILED = PROGRAMS / "compiled_recompile.py"


def run(script: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    (tmp / "tmp").mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path, "TMPDIR": str(tmp / "tmp")}
    return subprocess.run([sys.executable, str(script), *args], env=env, cwd=tmp,
                          capture_output=True, text=True, timeout=300)


def line_of(script: Path, marker: str) -> int:
    return next(i for i, text in enumerate(script.read_text().splitlines(), 1) if marker in text)


def test_guard_raises_at_the_barrier_naming_the_line(tmp_path: Path) -> None:
    proc = run(LATE, "--guard", tmp=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = line_of(LATE, "# the line to change")
    # step 20 compiled a new graph; the barrier that ends step 21 knows which line made it
    assert "step 19 done" in proc.stdout and "step 21 done" not in proc.stdout
    last = proc.stderr.strip().splitlines()
    error = next(i for i, text in enumerate(last) if text.startswith("lazyscope.core.errors.GuardError"))
    message = "\n".join(last[error:])
    assert "step 21: max-recompiles:" in message, message
    assert "from step 2 on (warmup_steps)" in message
    assert f"[recompile] {LATE}:{line} " in message, message
    assert "step 20: the f32[?,16] input dim 0: 8 -> 9" in message
    assert "fix: " in message
    # no run directory is left behind (none was asked for)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_guard_passes_a_healthy_loop_and_keeps_out(tmp_path: Path) -> None:
    proc = run(LATE, "--guard", "--recompile-at", "-1", tmp=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 39 done" in proc.stdout and proc.stderr == ""


def test_guard_on_torch_compile(tmp_path: Path) -> None:
    proc = run(COMPILED, tmp=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "step 4 done" in proc.stdout and "step 5 done" not in proc.stdout
    assert "GuardError: lazyscope.guard: step 5: max-recompiles:" in proc.stderr
    # the line the program marks: where the value the compiled function guards on is set
    line = line_of(COMPILED, "# the line to change")
    assert f"[recompile] {COMPILED}:{line} " in proc.stderr, proc.stderr
    assert "scale value 1.0 -> 2.0" in proc.stderr
    healthy = run(COMPILED, "--recompile-at", "-1", tmp=tmp_path)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "step 7 done" in healthy.stdout
