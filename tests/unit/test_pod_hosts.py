"""A pod's hosts side by side (analyze/hosts.py) on runs built in memory: the "stopped"
finding names the program's line a host raised at, or says why no line can be named."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.hosts import build_pod_report
from lazyscope.model import PodRun, Run
from lazyscope.model.info import ERROR_SITE
from tests.builders import build_run

TRAIN = "/work/train.py"


def _host(tmp: Path, host: int, steps: int, **kw: object) -> Run:
    return build_run(tmp / f"host{host}", steps=[{"wall_s": 0.1}] * steps, **kw)  # type: ignore[arg-type]


def _pod(tmp: Path, stopped: Run) -> PodRun:
    return PodRun(path=tmp, hosts={0: _host(tmp, 0, 12), 1: _host(tmp, 1, 12), 2: stopped},
                  name="gs://b/run")


def _stopped(report) -> dict:
    (found,) = [f for f in report.findings if f.kind == "divergence"
                and f.facts.diverges == "stopped"]
    return found


def test_a_host_that_raised_is_stopped_at_the_line_it_raised_at(tmp_path: Path) -> None:
    error = "ValueError: bad batch at step 5 (at /work/train.py:41)"
    host = _host(tmp_path, 2, 5, status="failed", error=error,
                 info={ERROR_SITE: {"file": TRAIN, "line": 41, "function": "step"}})
    report = build_pod_report(_pod(tmp_path, host))
    f = _stopped(report)
    assert (f.file, f.line, f.function) == (TRAIN, 41, "step")
    assert [(fr.file, fr.line) for fr in f.stack] == [(TRAIN, 41)]
    assert f.facts.host == 2 and f.facts.last_step == 5 and f.facts.no_line is None
    assert f.detail.startswith(f"host 2 stopped at step 5 of the others' 12 (status failed: "
                               f"{error}); its program raised the error at this line")
    assert "host2/error.txt" in f.fix
    # check fails the pod with the finding at its line
    result = check_report(report, Rules())
    (v,) = [v for v in result.violations if v.rule == "no-host-divergence"]
    assert any(e.startswith(f"{TRAIN}:41: host 2 stopped") for e in v.evidence)


def test_a_killed_host_says_why_no_line_can_be_named(tmp_path: Path) -> None:
    host = _host(tmp_path, 2, 5)
    host.meta.status = "running"  # never finalised, no live writer: killed
    assert host.status == "incomplete"
    f = _stopped(build_pod_report(_pod(tmp_path, host)))
    assert (f.file, f.line, f.stack) == ("", 0, [])
    assert f.facts.no_line is not None and "killed without a trace of where" in f.facts.no_line
    assert f.detail.startswith("host 2 stopped at step 5 of the others' 12 (status "
                               "incomplete); no line can be named: host 2 was killed without "
                               "a trace of where")
    assert "host 2's own log" in f.fix and "dmesg" in f.fix


def test_a_failure_at_no_line_of_the_program_says_so(tmp_path: Path) -> None:
    # an error recorded with no site (lazyscope's, a library's), and a host stopped by a signal
    failed = _host(tmp_path, 2, 5, status="failed",
                   error="the program exited with status 3")
    f = _stopped(build_pod_report(_pod(tmp_path, failed)))
    assert f.file == "" and f.facts.no_line == ("no line of the program raised the error "
                                                 "that ended host 2's run")
    sig = _host(tmp_path / "sig", 2, 5, status="interrupted", error="terminated by SIGTERM")
    f = _stopped(build_pod_report(_pod(tmp_path / "sig", sig)))
    assert f.file == "" and "stopped from outside" in (f.facts.no_line or "")
    assert "preemption" in f.fix


def test_a_recorded_site_that_is_no_place_reads_as_none(tmp_path: Path) -> None:
    for site in ({"file": "", "line": 3}, {"file": TRAIN, "line": True}, {"line": 3}, "x"):
        run = _host(tmp_path / str(abs(hash(str(site)))), 2, 1, status="failed",
                    info={ERROR_SITE: site})
        assert run.meta.run_info.error_frame is None
