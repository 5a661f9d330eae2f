"""``lazyscope check RUN --baseline BASE`` on real XLA:CPU runs of one program
(``tests/programs/baseline/bl.py``: 40 steps of about 20 ms of compute), each traced in a fresh
process (``lazyscope trace``). The baseline is traced first; then, while a second training run
of the same program (untraced, in another process) loads both cores, four reruns of the
program, one with a read every step and one with twice the work. The four reruns pass; the read
fails at its line, twice the work on its CPU time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd

pytestmark = [pytest.mark.xla]

PROGRAM = REPO / "tests" / "programs" / "baseline" / "bl.py"
READ_LINE = next(i for i, t in enumerate(PROGRAM.read_text().splitlines(), 1) if "# the read" in t)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("baseline")

    def trace(name: str, *args: str) -> None:
        proc = lazyscope_cmd("trace", "--out", str(base / name), "--no-views", str(PROGRAM),
                             *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    trace("base")
    # a second training run on the same machine, both cores busy for the rest of the traces
    loader = subprocess.Popen([sys.executable, str(PROGRAM), "--steps", "1000000"],
                              env={**os.environ, "PJRT_DEVICE": "CPU"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for i in range(4):
            trace(f"rerun{i}")
        trace("read", "--read-every-step")
        trace("work", "--work", "2")
    finally:
        loader.kill()
        loader.wait()
    return {p.name: p for p in base.iterdir()}


def test_four_reruns_on_a_loaded_machine_pass(runs: dict[str, Path]) -> None:
    from lazyscope.analyze.baseline import others_load
    from lazyscope.analyze.report import build_report
    from lazyscope.store import load_run

    for i in range(4):
        run = runs[f"rerun{i}"]
        # the second training run did load the machine while this one ran
        loaded = others_load(build_report(load_run(run)))
        assert loaded is not None and loaded > 0.25, loaded
        proc = lazyscope_cmd("check", str(run), "--baseline", str(runs["base"]))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"against the baseline {runs['base']}" in proc.stdout
        assert "ok   baseline-cpu-time" in proc.stdout and "ok   baseline-step-time" in \
            proc.stdout
        assert "result: PASS (5 rules checked)" in proc.stdout


def test_a_read_every_step_fails_at_its_line(runs: dict[str, Path]) -> None:
    proc = lazyscope_cmd("check", str(runs["read"]), "--baseline", str(runs["base"]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for rule in ("baseline-syncs", "baseline-executions", "baseline-compiles"):
        assert f"FAIL {rule}: " in proc.stdout, proc.stdout
    assert f"a new graph cut at {PROGRAM}:{READ_LINE} (1 compilation there)" in proc.stdout
    assert f"a new host read at {PROGRAM}:{READ_LINE}: 40 in the run, none in the baseline" \
        in proc.stdout


def test_twice_the_work_fails_on_its_cpu_time(runs: dict[str, Path]) -> None:
    proc = lazyscope_cmd("check", str(runs["work"]), "--baseline", str(runs["base"]),
                         "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    cpu = next(v for v in data["violations"] if v["rule"] == "baseline-cpu-time")
    more = re.search(r"\(\+(\d+\.\d)%\) more than the baseline's", cpu["message"])
    assert more and float(more[1]) > 60, cpu  # about twice the baseline's CPU
    assert any("is not the baseline's (other content" in e for e in cpu["evidence"]), cpu
    assert {v["rule"] for v in data["violations"]} <= {"baseline-cpu-time", "baseline-step-time"}
    # a tolerance that allows it passes its CPU time
    lenient = lazyscope_cmd("check", str(runs["work"]), "--baseline", str(runs["base"]),
                            "--tolerance", "150%")
    assert "ok   baseline-cpu-time" in lenient.stdout, lenient.stdout
    # the baseline against twice the work: faster is never a failure
    back = lazyscope_cmd("check", str(runs["base"]), "--baseline", str(runs["work"]))
    assert back.returncode == 0, back.stdout
    bad = lazyscope_cmd("check", str(runs["base"]), "--baseline", str(runs["work"]),
                        "--tolerance", "ten")
    assert bad.returncode == 2 and "--tolerance: 'ten' is not a number (a share: 10% or 0.1)" in bad.stderr
