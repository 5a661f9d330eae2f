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


def test_guard_entered_after_torch_xla_compiled_still_fails_a_recompiling_loop(
        tmp_path: Path) -> None:
    """torch_xla compiled before the guard: it explains nothing of what it compiles then, and
    the guard judges the compilations its step counters show from the warm-up on (was: it
    passed a loop that recompiled every step)."""
    proc = run(LATE, "--guard", "--compile-first", tmp=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "step 19 done" in proc.stdout and "step 21 done" not in proc.stdout
    assert "step 20: max-recompiles: 1 compilation from step 2 on (warmup_steps), counted by " \
           "the backend, their causes unknown; at most 0 allowed" in proc.stderr, proc.stderr
    healthy = run(LATE, "--guard", "--compile-first", "--recompile-at", "-1", tmp=tmp_path)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "step 39 done" in healthy.stdout


def test_two_guards_entered_together_from_two_threads(tmp_path: Path) -> None:
    """One trace per process: the guard that entered first records its 5 steps, the other is
    refused in one line naming the thread that holds the trace (was: both entered, one
    recorded 0 steps and passed)."""
    proc = run(PROGRAMS / "two_threads.py", tmp=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    ok = [n for n, v in lines.items() if v == "ok"]
    assert len(ok) == 1, lines
    other = "b" if ok == ["a"] else "a"
    assert lines[other] == (
        f"UsageError: lazyscope.guard() cannot be entered inside a lazyscope trace of the same "
        f"process (thread worker-{ok[0]}'s) (the one writing {tmp_path / f'run-{ok[0]}'}): one "
        "trace per process at a time, whatever thread enters it; guard one thread, or the "
        "whole process"), lines
    from lazyscope.store import load_run

    winner, refused = load_run(tmp_path / f"run-{ok[0]}"), load_run(tmp_path / f"run-{other}")
    assert (len(winner.steps), winner.meta.status) == (5, "ok")
    assert (len(refused.steps), refused.meta.status) == (0, "failed")


def test_a_syncs_rule_the_backend_cannot_measure_is_refused(tmp_path: Path) -> None:
    """As `lazyscope check --max-syncs-per-step` refuses it on a CPU run of --backend eager."""
    script = tmp_path / "syncs.py"
    script.write_text(
        "import lazyscope, torch\n"
        "with lazyscope.guard(max_syncs_per_step=0, backend='eager'):\n"
        "    for i in range(3):\n"
        "        torch.ones(3).sum().item()\n"
        "        lazyscope.barrier()\n"
        "print('passed')\n")
    proc = run(script, tmp=tmp_path)
    assert proc.returncode == 1 and "passed" not in proc.stdout, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "lazyscope.core.errors.UsageError: lazyscope.guard: max_syncs_per_step cannot be "
        "checked: host syncs are not measured by the eager backend on cpu (as `lazyscope check "
        "--max-syncs-per-step` refuses it)")
    assert list((tmp_path / "tmp").iterdir()) == []  # its scratch run is gone
