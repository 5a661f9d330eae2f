"""A pod's hosts side by side (analyze/hosts.py) on runs built in memory: the "stopped"
finding names the program's line a host raised at, or says why no line can be named; a host
whose heartbeat is fresh is still running, never stopped (store/remote.py's heartbeat)."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.hosts import build_pod_report, expected_hosts
from lazyscope.backends.hosts import launcher_hosts
from lazyscope.model import PodRun, Run
from lazyscope.model.info import ERROR_SITE
from lazyscope.render.text import render_text
from lazyscope.store import load_run, load_target
from lazyscope.store.layout import UPLOAD_FILE
from lazyscope.store.remote import (
    Spool,
    Uploader,
    _stored_at,
    beat_seconds,
    heard_from,
    heard_recently,
    stale_after,
)
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


# --------------------------------------------------------------------------- a host still tracing

BEAT = {"state": "writing", "host": 2, "pid": 4321, "machine": "vm-2", "every": 5.0}


def test_a_fresh_heartbeat_is_a_live_writer_and_a_stale_one_is_not() -> None:
    now = 1_000_000.0
    assert heard_recently({**BEAT, "stored_at": now - 2}, now) == \
        "pid 4321 (vm-2), its last upload 2 s ago"
    limit = stale_after(5.0)
    assert limit == 3 * 5.0 + 3.0
    assert heard_recently({**BEAT, "stored_at": now - limit + 0.5}, now) is not None
    assert heard_recently({**BEAT, "stored_at": now - limit - 0.5}, now) is None  # killed
    assert heard_recently({**BEAT, "stored_at": now + 30}, now) is not None  # clock behind
    assert heard_recently({**BEAT, "state": "ended", "stored_at": now}, now) is None
    for bad in ({**BEAT}, {**BEAT, "stored_at": "x"}, {**BEAT, "stored_at": now, "every": 0},
                {**BEAT, "stored_at": now, "every": True}):
        assert heard_recently(bad, now) is None
    assert beat_seconds(0.3) == 1.0 and beat_seconds(5.0) == 5.0


def test_when_the_bucket_stored_an_object() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert _stored_at({"mtime": at}) == at.timestamp()  # gcsfs
    assert _stored_at({"LastModified": at}) == at.timestamp()  # s3fs
    assert _stored_at({"updated": "2026-01-02T03:04:05.000Z"}) == at.timestamp()
    assert _stored_at({"mtime": 12.5}) == 12.5  # a local file
    assert _stored_at({"size": 3}) is None


def _downloaded_part(tmp: Path, host: int, steps: int, stored_at: float) -> Run:
    """A host's part as a report's download has it: meta.json still ``running`` (its trace
    never finalised it) and its heartbeat stamped with when the bucket stored it."""
    path = tmp / f"host{host}"
    build_run(path, steps=[{"wall_s": 0.1}] * steps)
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "status": "running", "ended_at": None}))
    (path / UPLOAD_FILE).write_text(json.dumps({**BEAT, "host": host, "stored_at": stored_at}))
    return load_run(path)


def test_a_host_still_tracing_is_running_not_stopped(tmp_path: Path) -> None:
    live = _downloaded_part(tmp_path, 2, 5, time.time() - 1)
    assert live.written_by is not None and live.written_by.startswith("pid 4321 (vm-2)")
    assert live.status == "running"
    report = build_pod_report(_pod(tmp_path, live))
    assert not [f for f in report.findings if f.kind == "divergence"]
    rows = {r.host: r for r in report.hosts or []}
    assert rows[2].status == "running" and rows[2].steps == 5
    assert rows[2].written_by == live.written_by and rows[0].written_by is None
    s = report.summary
    assert s.status == "running" and not s.complete
    assert s.being_written_by == f"host 2 (5 steps so far; {live.written_by})"
    assert report.verdict.startswith("run still being written (host 2 running): 3 hosts;")
    text = render_text(report)
    assert text.startswith(f"run still being written by host 2 (5 steps so far; "
                           f"{live.written_by}): the report so far\n")
    assert "running, 5 steps so far" in text
    # check: no host divergence; the gate of a run still being written, as for a local one
    result = check_report(report, Rules())
    assert [v.rule for v in result.violations] == ["run-status"]
    assert result.violations[0].message.startswith(
        f"the run is still being written by host 2 (5 steps so far; {live.written_by}); ")
    assert check_report(report, Rules(allow_incomplete=True)).passed


def test_a_host_whose_heartbeat_stopped_is_stopped(tmp_path: Path) -> None:
    dead = _downloaded_part(tmp_path, 2, 5, time.time() - stale_after(BEAT["every"]) - 1)
    assert dead.written_by is None and dead.status == "incomplete"
    f = _stopped(build_pod_report(_pod(tmp_path, dead)))
    assert f.facts.host == 2 and "killed without a trace of where" in (f.facts.no_line or "")


def test_a_launchers_ranks_each_beat_beside_their_own_run(tmp_path: Path) -> None:
    """Under a launcher each rank of a host uploads its own rank<R>/ and beats there; one
    process that writes the whole part (a spawning parent) beats at the part."""
    spool = Spool(tmp_path / "spool", "gs://b/run", 2)
    uploader = Uploader(spool)
    spool.part.mkdir(parents=True)
    assert uploader._beat_dir() == ""  # nothing written yet
    (spool.part / "rank3").mkdir()
    assert uploader._beat_dir() == "rank3/"
    (spool.part / "rank4").mkdir()
    (spool.part / "meta.json").write_text("{}")
    assert uploader._beat_dir() == ""
    # a reader takes a rank's own heartbeat, else its host part's
    now = time.time()
    part, rank = tmp_path / "host2", tmp_path / "host2" / "rank0"
    rank.mkdir(parents=True)
    assert heard_from(rank) is None
    (part / UPLOAD_FILE).write_text(json.dumps({**BEAT, "pid": 1, "stored_at": now}))
    assert (heard_from(rank) or "").startswith("pid 1 ")
    (rank / UPLOAD_FILE).write_text(json.dumps({**BEAT, "pid": 2, "stored_at": now}))
    assert (heard_from(rank) or "").startswith("pid 2 ")


def _straggler(report) -> object:
    (found,) = [f for f in report.findings if f.kind == "divergence"
                and f.facts.diverges == "straggler"]
    return found


def test_a_straggler_is_at_the_line_only_it_has_a_finding_at_else_says_why_none(
        tmp_path: Path) -> None:
    """Host 2's steps take 3x the others'. With a host sync at every step that only host 2
    makes, the straggler finding is at that line; without one, no line can be named and the
    finding says why."""
    from lazyscope.model import Frame, Sync

    read = (Frame(TRAIN, 57, "step", False),)
    syncs = [{"kind": "sync", "step": i, "stack": read, "payload": Sync(read=".item()"),
              "value": 1.0} for i in range(12)]
    fast = {h: build_run(tmp_path / f"a{h}", steps=[{"wall_s": 0.1}] * 12) for h in (0, 1)}
    slow = build_run(tmp_path / "a2", steps=[{"wall_s": 0.3, "from_device_count": 1}] * 12,
                     events=syncs)
    f = _straggler(build_pod_report(PodRun(path=tmp_path, hosts={**fast, 2: slow})))
    assert (f.file, f.line) == (TRAIN, 57) and f.facts.no_line is None
    assert "only this host has its" in f.detail and f.fix.endswith("(on host 2)")

    plain = build_run(tmp_path / "b2", steps=[{"wall_s": 0.3}] * 12)
    f = _straggler(build_pod_report(PodRun(path=tmp_path, hosts={**fast, 2: plain})))
    assert f.file == "" and f.where == "no line"
    assert f.facts.no_line.startswith("host 2 is slower at every step, not at a line")


def test_a_host_stopped_in_its_warm_up_is_no_straggler(tmp_path: Path) -> None:
    """Host 2 stopped after 3 steps, two of them compiling (its median is a compile step's):
    it is stopped, not a straggler; the steady hosts are judged as before."""
    compiling = [{"wall_s": 0.5, "compile_count": 1}] * 2 + [{"wall_s": 0.1}]
    steady = compiling + [{"wall_s": 0.1}] * 9
    hosts = {h: build_run(tmp_path / f"w{h}", steps=steady) for h in (0, 1)}
    hosts[2] = build_run(tmp_path / "w2", steps=compiling)
    hosts[2].meta.status = "running"  # never finalised, no live writer: killed
    report = build_pod_report(PodRun(path=tmp_path, hosts=hosts))
    kinds = [f.facts.diverges for f in report.findings if f.kind == "divergence"]
    assert kinds == ["stopped"]


def test_a_median_of_a_few_steps_makes_no_straggler(tmp_path: Path) -> None:
    """Two hosts of a 4-step run on a loaded machine read 3.75x apart in the suite: a median
    over fewer than STRAGGLER_MIN_STEPS steady steps is no evidence; the same ratio over
    enough steps is a straggler."""
    from lazyscope.analyze.ranks import STRAGGLER_MIN_STEPS

    def pod(steps: int) -> PodRun:
        fast = {h: build_run(tmp_path / f"{steps}f{h}", steps=[{"wall_s": 0.004}] * steps)
                for h in (0, 1)}
        slow = build_run(tmp_path / f"{steps}s", steps=[{"wall_s": 0.015}] * steps)
        return PodRun(path=tmp_path, hosts={**fast, 2: slow})

    assert 4 < STRAGGLER_MIN_STEPS <= 12
    few = build_pod_report(pod(4))
    assert not [f for f in few.findings if f.kind == "divergence"]
    assert _straggler(build_pod_report(pod(12))).facts.host == 2


def _missing(report) -> list:
    return [f for f in report.findings if f.kind == "divergence"
            and f.facts.diverges == "missing"]


def test_a_host_the_launcher_declared_that_never_uploaded_is_missing(tmp_path: Path) -> None:
    pod = PodRun(path=tmp_path, hosts={0: _host(tmp_path, 0, 12), 1: _host(tmp_path, 1, 12)},
                 name="gs://b/run", declared={0: (3, "TPU_WORKER_HOSTNAMES")}, seen={0, 1})
    report = build_pod_report(pod)
    (f,) = _missing(report)
    assert f.facts.host == 2 and f.facts.expected == 3
    assert f.facts.expected_from == "TPU_WORKER_HOSTNAMES on host 0"
    assert f.detail.startswith("host 2 of the 3 expected (TPU_WORKER_HOSTNAMES on host 0) has "
                               "no part in the bucket: it uploaded nothing")
    assert [(r.host, r.status, r.steps) for r in report.hosts] == [
        (0, "ok", 12), (1, "ok", 12), (2, "missing", 0)]
    assert report.summary.status == "incomplete" and not report.clean
    assert report.verdict.startswith("2 of 3 hosts (host 2 missing); host 0: ")
    text = render_text(report)
    assert "hosts (3):" in text and "   2 missing" in text
    result = check_report(report, Rules())
    assert {v.rule for v in result.violations} == {"run-status", "no-host-divergence"}
    # --hosts says otherwise: the user knows the pod
    assert _missing(build_pod_report(pod, hosts=2)) == []
    assert [f.facts.host for f in _missing(build_pod_report(pod, hosts=5))] == [2, 3, 4]


def test_without_a_launcher_the_highest_host_seen_says_who_is_missing(tmp_path: Path) -> None:
    # host 1 started an upload that never completed (its heartbeat only), host 2 uploaded
    pod = PodRun(path=tmp_path, hosts={0: _host(tmp_path, 0, 12), 2: _host(tmp_path, 2, 12)},
                 seen={0, 1, 2})
    assert expected_hosts(pod) == (3, "host 2 in the bucket")
    (f,) = _missing(build_pod_report(pod))
    assert f.facts.host == 1 and "its first upload never completed" in f.detail
    # nothing says more hosts than are there: none missing, as before
    whole = PodRun(path=tmp_path, hosts={0: _host(tmp_path, 0, 12)})
    assert expected_hosts(whole) == (1, "host 0 in the bucket") and \
        _missing(build_pod_report(whole)) == []


def test_the_launchers_host_count(monkeypatch) -> None:
    for name in ("TPU_WORKER_HOSTNAMES", "GROUP_WORLD_SIZE", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert launcher_hosts() is None
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert launcher_hosts() == (4, "WORLD_SIZE / LOCAL_WORLD_SIZE")
    monkeypatch.setenv("GROUP_WORLD_SIZE", "2")
    assert launcher_hosts() == (2, "GROUP_WORLD_SIZE")
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t1k-w-0,t1k-w-1,t1k-w-2")
    assert launcher_hosts() == (3, "TPU_WORKER_HOSTNAMES")


def test_the_heartbeats_declared_count_is_read_back(tmp_path: Path) -> None:
    for host in (0, 1):
        _host(tmp_path, host, 3)
    (tmp_path / "host0" / UPLOAD_FILE).write_text(json.dumps(
        {**BEAT, "hosts": 4, "hosts_from": "TPU_WORKER_HOSTNAMES"}))
    (tmp_path / "host3").mkdir()  # a first upload under way: a heartbeat, no run yet
    (tmp_path / "host3" / UPLOAD_FILE).write_text(json.dumps(BEAT))
    pod = load_target(tmp_path)
    assert isinstance(pod, PodRun) and sorted(pod.hosts) == [0, 1]
    assert pod.declared == {0: (4, "TPU_WORKER_HOSTNAMES")} and pod.seen == {0, 1, 3}
    assert [f.facts.host for f in _missing(build_pod_report(pod))] == [2, 3]
