"""``lazyscope check RUN --baseline BASE`` on real XLA:CPU runs of one program (40 steps of about
20 ms): a rerun passes, the same program with 20 ms more per step fails. Each trace is a fresh
process (``lazyscope trace``)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd

pytestmark = [pytest.mark.xla]

PROGRAM = REPO / "tests" / "programs" / "guard" / "late_recompile.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("baseline")
    sleeps = {"base": "20", "rerun": "20", "slower": "40"}

    def trace(name: str) -> tuple[str, Path]:
        out = base / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(PROGRAM),
                             "--recompile-at", "-1", "--sleep-ms", sleeps[name])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return name, out

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(trace, sleeps))


def test_a_rerun_passes(runs: dict[str, Path]) -> None:
    proc = lazyscope_cmd("check", str(runs["rerun"]), "--baseline", str(runs["base"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"against the baseline {runs['base']}" in proc.stdout
    assert "ok   baseline-step-time" in proc.stdout
    assert "result: PASS (3 rules checked)" in proc.stdout


def test_twenty_ms_more_per_step_fails(runs: dict[str, Path]) -> None:
    proc = lazyscope_cmd("check", str(runs["slower"]), "--baseline", str(runs["base"]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL baseline-step-time: the median step took" in proc.stdout
    assert "ok   baseline-compiles" in proc.stdout and "ok   baseline-syncs" in proc.stdout
    as_json = lazyscope_cmd("check", str(runs["slower"]), "--baseline", str(runs["base"]),
                            "--format", "json")
    assert as_json.returncode == 1
    data = json.loads(as_json.stdout)
    assert data["baseline"] == str(runs["base"]) and not data["passed"]
    (v,) = data["violations"]
    assert v["rule"] == "baseline-step-time" and v["actual"] - v["limit"] > 0.01
    # the baseline against the slower run: faster is no failure
    back = lazyscope_cmd("check", str(runs["base"]), "--baseline", str(runs["slower"]))
    assert back.returncode == 0, back.stdout
