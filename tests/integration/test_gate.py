"""`lazyscope check` and `lazyscope diff` as real subprocesses on real XLA:CPU runs
(the session's `lazytensor-dynamic --steps 20` runs in static and dynamic mode)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import lazyscope_cmd

pytestmark = [pytest.mark.xla]


def test_check_fails_dynamic_and_passes_static(lazytensor_runs) -> None:
    dyn = lazyscope_cmd("check", str(lazytensor_runs["dynamic"]))
    assert dyn.returncode == 1, dyn.stderr
    assert "FAIL max-recompiles: 19 recompilations in steady state at 1 site" in dyn.stdout
    assert "lazytensor_dynamic.py:" in dyn.stdout and dyn.stderr == ""
    static = lazyscope_cmd("check", str(lazytensor_runs["static"]), "--no-fallbacks",
                           "--max-syncs-per-step", "0", "--max-recompiles", "0")
    assert static.returncode == 0, static.stdout + static.stderr
    assert "result: PASS (3 rules checked)" in static.stdout


def test_diff_static_to_dynamic(lazytensor_runs) -> None:
    proc = lazyscope_cmd("diff", str(lazytensor_runs["static"]), str(lazytensor_runs["dynamic"]),
                         "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    metrics = {m["name"]: m for m in d["metrics"]}
    assert (metrics["compiles"]["a"], metrics["compiles"]["b"]) == (1, 20)
    assert metrics["recompiles"]["delta"] == 19
    (changed,) = d["compile_sites"]["changed"]
    assert changed["site"].endswith("scenarios/lazytensor_dynamic.py:" + changed["site"].split(":")[-1])
    assert (changed["a"], changed["b"]) == (1, 20)
