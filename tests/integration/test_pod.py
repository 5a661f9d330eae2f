"""A pod written to a bucket: real `lazyscope trace` processes, each posing as a host
(``CLOUD_TPU_TASK_ID``), each with its own disk (its own cache and spool), tracing
``tests/programs/pod_step.py`` to ``gs://BUCKET/RUN`` on a real GCS API server
(gcp-storage-emulator, started once for the session on a free port). One host takes another
batch length from step 6, one is read while it still runs (paused), then killed. Nothing is
mocked.
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

from lazyscope.store.remote import beat_seconds, stale_after
from tests.conftest import GCS_BUCKET as BUCKET
from tests.conftest import REPO, lazyscope_cmd

pytest.importorskip("gcsfs", reason="the gcs extra (pip install 'lazyscope[gcs]')")

PROGRAM = REPO / "tests" / "programs" / "pod_step.py"
#: the line of pod_step.py that makes the batch (the line every divergence finding names)
BATCH_LINE = next(i for i, text in enumerate(PROGRAM.read_text().splitlines(), 1)
                  if "# the batch" in text)


def _host_env(gcs: dict[str, str], tmp: Path, host: int, **extra: str) -> dict[str, str]:
    """Host ``host``'s environment: its task id, its own disk (cache and spool)."""
    return {**gcs, "CLOUD_TPU_TASK_ID": str(host), "XDG_CACHE_HOME": str(tmp / f"disk{host}"),
            "LAZYSCOPE_SPOOL": "", **extra}


def _start(gcs: dict[str, str], tmp: Path, host: int, url: str, *program: str,
           options: tuple[str, ...] = (), **extra: str) -> subprocess.Popen[str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path,
           **_host_env(gcs, tmp, host, **extra)}
    log = open(tmp / f"host{host}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([sys.executable, "-m", "lazyscope", "trace", "-q", *options,
                             "--out", url, str(PROGRAM), *program], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, text=True)


def _report(gcs: dict[str, str], tmp: Path, url: str, disk: str = "reader") -> dict:
    proc = lazyscope_cmd("report", url, "--format", "json",
                         env={**gcs, "XDG_CACHE_HOME": str(tmp / disk)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_a_pod_with_a_divergent_host_and_a_killed_one(gcs: dict[str, str], tmp_path: Path) -> None:
    url = f"gs://{BUCKET}/pod-{os.getpid()}"
    marker = tmp_path / "host2-at-step-5"
    program = ["--steps", "12", "--odd-host", "1", "--odd-step", "6", "--hang-host", "2",
               "--hang-at", "5", "--marker", str(marker)]
    procs = {h: _start(gcs, tmp_path, h, url, *program, LAZYSCOPE_UPLOAD_SECONDS="0.3")
             for h in range(3)}
    _wait_for(marker)
    time.sleep(1.0)  # a few background uploads of host 2's steps 0..4
    for h in (0, 1):
        assert procs[h].wait(timeout=300) == 0, (tmp_path / f"host{h}.log").read_text()
    # host 2 still runs (paused at step 5): its heartbeat is fresh, it is no stopped host
    reader = {**gcs, "XDG_CACHE_HOME": str(tmp_path / "reader")}
    live = _report(gcs, tmp_path, url)
    row = live["hosts"][2]
    assert (row["host"], row["status"], row["steps"]) == (2, "running", 5)
    assert row["written_by"].startswith(f"pid {procs[2].pid} ")
    assert live["status"] == "running"
    assert live["being_written_by"].startswith("host 2 (5 steps so far; ")
    assert live["verdict"].startswith("run still being written (host 2 running): 3 hosts;")
    assert "stopped" not in {f["diverges"] for f in live["findings"] if f["kind"] == "divergence"}
    text = lazyscope_cmd("report", url, env=reader)
    assert text.stdout.startswith("run still being written by host 2 (5 steps so far; ")
    assert "running, 5 steps so far" in text.stdout
    check = lazyscope_cmd("check", url, env=reader)
    assert "still being written by host 2" in check.stdout and "stopped" not in check.stdout
    killed_at = time.monotonic()
    procs[2].send_signal(signal.SIGKILL)
    procs[2].wait(timeout=30)
    # what host 2's background uploads took to the bucket before it was killed; its heartbeat,
    # no longer rewritten, says it stopped once it is stale_after(1 s) old
    time.sleep(max(0.0, stale_after(beat_seconds(0.3)) + 0.5 - (time.monotonic() - killed_at)))
    report = _report(gcs, tmp_path, url)
    rows = {r["host"]: r for r in report["hosts"]}
    assert sorted(rows) == [0, 1, 2]
    assert rows[0]["steps"] == rows[1]["steps"] == 12 and rows[2]["steps"] == 5
    assert rows[0]["status"] == rows[1]["status"] == "ok"
    assert rows[2]["status"] == "incomplete"
    assert rows[1]["graphs_only_here"] == 1 and rows[0]["graphs_only_here"] == 0
    assert rows[0]["p99_step_s"] >= rows[0]["median_step_s"] > 0
    divergence = {f["diverges"]: f for f in report["findings"] if f["kind"] == "divergence"}
    # (a straggler may be found too: three processes share this machine's cores, the steps'
    # times are not the test's to set)
    assert {"graphs", "stopped"} <= set(divergence)
    graphs = divergence["graphs"]
    assert graphs["host"] == 1 and graphs["steps"] == [6]
    assert (Path(graphs["file"]).name, graphs["line"]) == ("pod_step.py", BATCH_LINE)
    assert [(c["what"], c["before"], c["after"]) for c in graphs["changes"]] == [("dim", 8, 12)]
    assert divergence["stopped"]["host"] == 2 and divergence["stopped"]["last_step"] == 5
    assert report["run_dir"] == url and report["status"] == "incomplete"
    assert divergence["stopped"]["no_line"].startswith("host 2 was killed without a trace")
    # the text report: a row per host, the finding at the line
    text = lazyscope_cmd("report", url, env=reader)
    assert "hosts (3):" in text.stdout and f"pod_step.py:{BATCH_LINE}" in text.stdout
    # check fails the divergent pod, with the evidence
    check = lazyscope_cmd("check", url, env=reader)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "FAIL no-host-divergence" in check.stdout and "host 1 compiled 1 graph" in check.stdout
    # the next lazyscope command on host 2 uploads what its spool kept, and removes it
    again = lazyscope_cmd("scenarios", env=_host_env(gcs, tmp_path, 2))
    assert again.returncode == 0
    assert f"uploaded what pid {procs[2].pid} left of {url}/host2" in again.stderr
    assert not any((tmp_path / "disk2" / "lazyscope" / "spool").iterdir())
    assert _report(gcs, tmp_path, url)["hosts"][2]["steps"] == 5


def test_a_killed_host_that_uploaded_nothing_is_recovered_by_the_next_command(
        gcs: dict[str, str], tmp_path: Path) -> None:
    """No background upload before the kill (a long interval): the bucket has no part of the
    host until the next lazyscope command on it uploads its spool."""
    url = f"gs://{BUCKET}/killed-{os.getpid()}"
    marker = tmp_path / "at-step-4"
    proc = _start(gcs, tmp_path, 3, url, "--steps", "8", "--hang-host", "3", "--hang-at", "4",
                  "--marker", str(marker), LAZYSCOPE_UPLOAD_SECONDS="1000")
    _wait_for(marker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    empty = lazyscope_cmd("report", url, env={**gcs, "XDG_CACHE_HOME": str(tmp_path / "r")})
    assert empty.returncode == 3 and "holds nothing" in empty.stderr
    recovered = lazyscope_cmd("report", url, "--format", "json",
                              env=_host_env(gcs, tmp_path, 3))
    assert recovered.returncode == 0, recovered.stderr
    assert f"uploaded what pid {proc.pid} left of {url}/host3" in recovered.stderr
    rows = json.loads(recovered.stdout)["hosts"]
    assert [(r["host"], r["steps"], r["status"]) for r in rows] == [(3, 4, "incomplete")]


def test_a_finished_pod_is_downloaded_once(gcs: dict[str, str], tmp_path: Path) -> None:
    """Each host's trace uploads its part at its end; a second report fetches nothing."""
    url = f"gs://{BUCKET}/twice-{os.getpid()}/"
    procs = [_start(gcs, tmp_path, h, url, "--steps", "4") for h in (0, 1)]
    for h, p in enumerate(procs):
        assert p.wait(timeout=300) == 0, (tmp_path / f"host{h}.log").read_text()
        assert f"run saved in {url.rstrip('/')}/host{h}" in (tmp_path / f"host{h}.log").read_text()
    code = (f"import json\nfrom lazyscope.store.remote import download\n"
            f"a, b = {{}}, {{}}\ndownload({url!r}, a); download({url!r}, b)\n"
            f"print(json.dumps([a, b]))")
    env = {**os.environ, **gcs, "XDG_CACHE_HOME": str(tmp_path / "r"), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    first, second = json.loads(out.stdout)
    assert first["fetched"] == first["objects"] > 0 and second["fetched"] == 0
    check = lazyscope_cmd("check", url, env={**gcs, "XDG_CACHE_HOME": str(tmp_path / "r")})
    assert check.returncode == 0, check.stdout + check.stderr
    # watch follows one host's part (ended: its verdict); a pod's URL names the parts
    reader = {**gcs, "XDG_CACHE_HOME": str(tmp_path / "r")}
    watched = lazyscope_cmd("watch", "-q", f"{url.rstrip('/')}/host1", env=reader)
    assert watched.returncode == 0 and "verdict:" in watched.stdout, watched.stderr
    pod = lazyscope_cmd("watch", "-q", "--timeout", "1", url, env=reader)
    assert pod.returncode == 3 and "is a pod: watch one host's part" in pod.stderr, pod.stderr
    # the spools of a finished trace are gone
    for h in (0, 1):
        assert not any((tmp_path / f"disk{h}" / "lazyscope" / "spool").iterdir())
    # a second trace of the same host into the same URL is refused without --force
    again = lazyscope_cmd("trace", "-q", "--out", url, str(PROGRAM), "--steps", "2",
                          env=_host_env(gcs, tmp_path, 0))
    assert again.returncode == 3 and "already holds" in again.stderr, again.stderr
    assert "--force" in again.stderr


def test_a_url_without_its_filesystem_says_which_extra(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['gcsfs'] = None\nfrom lazyscope.cli import main\n"
            "sys.exit(main(['trace', '--out', 'gs://b/run', 'counts.py']))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, cwd=REPO / "tests" / "programs")
    assert "pip install 'lazyscope[gcs]'" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (REPO / "tests" / "programs" / "gs:").exists()


def test_one_profile_session_for_the_pod(gcs: dict[str, str], tmp_path: Path) -> None:
    """--profile on every host: every host's capture in one session directory of the run,
    named from the URL (XProf's joint view of the hosts)."""
    name = f"prof-{os.getpid()}"
    url = f"gs://{BUCKET}/{name}"
    procs = [_start(gcs, tmp_path, h, url, "--steps", "5", options=("--profile-steps", "1:3"))
             for h in (0, 1)]
    for h, p in enumerate(procs):
        assert p.wait(timeout=300) == 0, (tmp_path / f"host{h}.log").read_text()
    local = _report(gcs, tmp_path, url)
    # the bucket's objects, as the report's download mirrors them
    copy = next((tmp_path / "reader" / "lazyscope" / "download").iterdir())
    profile = copy / "tensorboard" / "plugins" / "profile"
    assert [p.name for p in profile.iterdir()] == [name]
    assert sorted(p.name for p in (profile / name).glob("*.xplane.pb")) == [
        "host0.xplane.pb", "host1.xplane.pb"]
    # the hosts' parts hold no profile of their own
    assert not (copy / "host0" / "tensorboard").exists()
    assert local["profile"]["captured_steps"] == [1, 3]
