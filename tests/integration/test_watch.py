"""`lazyscope watch` and `lazyscope report` of a run still being written, on real XLA:CPU.

A traced program of 40 steps of about 20 ms that starts recompiling at step 20
(``tests/programs/guard/late_recompile.py``) is watched from another process started before the
run exists: the watcher says the alert the trace says on its stderr (the same kind, the same
line to change, the same fix), while the trace still runs, and ends with the final verdict of
the trace's own report. `report` of a run mid-way prints the report so far, marked as such.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.xla]

PROGRAM = REPO / "tests" / "programs" / "guard" / "late_recompile.py"
LINE = next(i for i, t in enumerate(PROGRAM.read_text().splitlines(), 1)
            if "# the line to change" in t)
ALERT = re.compile(r"^lazyscope: step (\d+): \[recompile\] (\S+): .*; fix: (.*)$")


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path}


def _lazyscope(*args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lazyscope", *args], cwd=REPO, env=_env(),
                            text=True, **kw)


def test_watch_says_the_trace_alert_while_it_runs_and_ends_with_its_verdict(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    watch = _lazyscope("watch", str(run), "--every", "1", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    said: list[tuple[float, str]] = []  # the watcher's stdout, each line with when it came

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            said.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with open(tmp_path / "trace.err", "w") as err:
        trace = _lazyscope("trace", "--out", str(run), "--no-views", str(PROGRAM),
                           stdout=subprocess.PIPE, stderr=err)
        trace_out, _ = trace.communicate(timeout=300)
    trace_ended = time.monotonic()
    assert trace.returncode == 0, trace_out + (tmp_path / "trace.err").read_text()
    assert watch.stderr is not None
    watch_err = watch.stderr.read()
    assert watch.wait(timeout=120) == 0, watch_err
    reader.join(timeout=30)

    # the trace's alert, on its stderr
    (traced,) = [ALERT.match(ln) for ln in (tmp_path / "trace.err").read_text().splitlines()
                 if ALERT.match(ln)]
    assert traced is not None and traced.group(2) == f"{PROGRAM}:{LINE}"
    # the watcher's: the same finding (the line to change, the fix's words), said once, after
    # step 20, before the trace had ended
    alerts = [(t, ALERT.match(ln)) for t, ln in said if ALERT.match(ln)]
    assert len(alerts) == 1, said
    when, watched = alerts[0]
    assert watched is not None and watched.group(2) == traced.group(2)
    # "dim 0 of ... grows at every compilation": the same words; the sizes seen so far differ
    # with the step each looked at
    assert _words(watched.group(3)) == _words(traced.group(3))
    assert 20 <= int(watched.group(1)) < 40 and when < trace_ended
    # the final verdict, the trace's report's own
    verdict = next(ln for ln in trace_out.splitlines() if ln.startswith("verdict: "))
    assert said[-1][1] == verdict and verdict.startswith("verdict: recompiles in steady state")
    lines = watch_err.splitlines()
    assert lines[0].startswith(f"lazyscope watch: waiting for a run in {run}")
    assert any(ln.startswith("lazyscope watch: step ") for ln in lines)
    assert lines[-1].startswith(f"lazyscope watch: {run} ended: status ok, 40 steps")


def test_report_mid_run_is_the_report_so_far(tmp_path: Path) -> None:
    run = tmp_path / "run"
    trace = _lazyscope("trace", "--out", str(run), "--no-views", str(PROGRAM), "--steps",
                       "2000", "--recompile-at", "-1", stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not (run / "steps.bin").exists() or b"\x01" not in (run / "steps.bin").read_bytes():
            assert trace.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        report = subprocess.run([sys.executable, "-m", "lazyscope", "report", str(run)],
                                cwd=REPO, env=_env(), capture_output=True, text=True,
                                timeout=120)
        html = subprocess.run([sys.executable, "-m", "lazyscope", "report", str(run),
                               "--format", "html"], cwd=REPO, env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert trace.poll() is None  # still running when both were read
    finally:
        trace.send_signal(signal.SIGINT)
        trace.communicate(timeout=120)
    assert report.returncode == 0, report.stderr
    first = report.stdout.splitlines()[0]
    assert re.fullmatch(rf"run still being written by pid {trace.pid} \(.+\): the report so "
                        "far", first), first
    assert "  status      running" in report.stdout
    assert re.search(r"^verdict: run still being written \(\d+ steps so far\): ",
                     report.stdout, re.M)
    assert html.returncode == 3 and "is still being written by" in html.stderr
    assert not (run / "report.html").exists()


def _words(fix: str) -> str:
    """A fix's first clause without its parenthesised numbers (the sizes seen so far)."""
    return re.sub(r"\s*\([^)]*\)", "", fix.split(":")[0])
