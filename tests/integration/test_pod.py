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
import threading
import time
from pathlib import Path

import pytest

from lazyscope.cli import main
from lazyscope.model import Frame, Meta
from lazyscope.store import RunWriter
from lazyscope.store.follow import RemoteRun
from lazyscope.store.layout import EVENTS_FILE
from lazyscope.store.remote import Spool, Uploader, beat_seconds, open_fs, stale_after
from tests.conftest import GCS_BUCKET as BUCKET
from tests.conftest import REPO, _free_port, lazyscope_cmd

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
    # host 3 in the bucket says the pod has hosts 0..3: the three others never uploaded
    assert [(r["host"], r["steps"], r["status"]) for r in rows] == [
        (0, 0, "missing"), (1, 0, "missing"), (2, 0, "missing"), (3, 4, "incomplete")]


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


def _write_steps(writer: RunWriter, first: int, n: int) -> None:
    """Steps ``first .. first+n-1``, each with a host sync at a line of its own (a new stack:
    new entries of intern.jsonl that events.bin refers to)."""
    for i in range(first, first + n):
        writer.write_event("sync", i, seconds=0.001,
                           stack=(Frame("train.py", 100 + i, "main", False),))
        writer.write_step(i, {"wall_s": 0.01, "compile_count": 0.0, "execute_count": 1.0})


def test_a_part_read_in_the_middle_of_an_upload_is_its_last_whole_upload(
        gcs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The bucket holds one upload's intern.jsonl and the next upload's events.bin (an upload
    under way): a reader takes the part's last whole upload, never the two as one run, and
    the next whole upload once it is there. Before the first whole upload, `watch` waits."""
    for name, value in {**gcs, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                        "LAZYSCOPE_SPOOL": str(tmp_path / "spool")}.items():
        monkeypatch.setenv(name, value)
    url = f"gs://{BUCKET}/torn-{os.getpid()}"
    spool = Spool.create(url, 0)
    uploader = Uploader(spool, interval=1000)
    writer = RunWriter(spool.part, Meta(target="train.py", target_kind="script", backend="xla"))
    _write_steps(writer, 0, 3)
    fs, root = open_fs(url)
    # the first upload under way: its heartbeat and events.bin are there, not yet meta.json
    uploader._beat(fs, root, 0)
    fs.pipe_file(f"{root}/host0/{EVENTS_FILE}", (spool.part / EVENTS_FILE).read_bytes())
    assert main(["watch", "--timeout", "0.5", f"{url}/host0"]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"lazyscope watch: waiting for a run in {url}/host0"), err
    assert "no run appeared there within 0.5 s" in err and "not a lazyscope run" not in err
    assert uploader.sync() > 0
    reader = RemoteRun(f"{url}/host0")
    reader.REFRESH_S = 0.0
    assert reader.state() == "run" and len(reader.load().steps) == 3
    # three more steps whose events refer to intern entries the bucket does not hold yet:
    # the next upload has sent events.bin, not yet intern.jsonl
    _write_steps(writer, 3, 3)
    fs.pipe_file(f"{root}/host0/{EVENTS_FILE}", (spool.part / EVENTS_FILE).read_bytes())
    torn = reader.load()  # not "events.bin refers to entry N of intern.jsonl": the run is corrupt
    assert len(torn.steps) == 3 and len(torn.events.indices("sync")) == 3
    fresh = RemoteRun(f"{url}/host0")  # a reader with no copy yet: the same whole upload
    assert len(fresh.load().steps) == 3
    assert uploader.sync() > 0
    whole = reader.load()
    assert len(whole.steps) == 6 and len(whole.events.indices("sync")) == 6
    writer.finish("ok")
    assert uploader.finish() is None and reader.load().meta.status == "ok"


FAIL_LINE = next(i for i, text in enumerate(PROGRAM.read_text().splitlines(), 1)
                 if "# the failing line" in text)


def test_watch_follows_a_live_pod_to_its_end_and_exits_5_on_a_host_that_failed(
        gcs: dict[str, str], tmp_path: Path) -> None:
    """`watch URL/host<N>` started before the first upload: it waits, follows host 0's part
    upload by upload to its end (exit 0), and host 1's to its error (exit 5, the error and the
    line it was raised at)."""
    url = f"gs://{BUCKET}/live-{os.getpid()}"
    env = {**os.environ, **gcs, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    watchers = {h: subprocess.Popen(
        [sys.executable, "-m", "lazyscope", "watch", "--every", "1", "--timeout", "300",
         f"{url}/host{h}"], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "XDG_CACHE_HOME": str(tmp_path / f"watcher{h}")}) for h in (0, 1)}
    procs = {h: _start(gcs, tmp_path, h, url, "--steps", "40", "--sleep-ms", "60",
                       "--fail-host", "1", "--fail-at", "30", LAZYSCOPE_UPLOAD_SECONDS="0.3")
             for h in (0, 1)}
    assert procs[0].wait(timeout=300) == 0, (tmp_path / "host0.log").read_text()
    assert procs[1].wait(timeout=300) == 5, (tmp_path / "host1.log").read_text()
    out0, err0 = watchers[0].communicate(timeout=120)
    out1, err1 = watchers[1].communicate(timeout=120)
    assert watchers[0].returncode == 0, err0
    lines = err0.splitlines()
    assert lines[0] == f"lazyscope watch: waiting for a run in {url}/host0 (up to 300 s)"
    assert lines[1].startswith(f"lazyscope watch: following {url}/host0 (written by ")
    progress = [ln for ln in lines if ln.startswith("lazyscope watch: step ")]
    assert len(progress) >= 2  # followed while it ran, not only read at its end
    assert lines[-1].startswith(f"lazyscope watch: {url}/host0 ended: status ok, 40 steps")
    assert "corrupt" not in err0 and out0.startswith("verdict: ")
    assert watchers[1].returncode == 5, err1
    assert f"{url}/host1 ended: status failed: RuntimeError: host 1 gave up at step 30 (at " \
        f"{PROGRAM}:{FAIL_LINE}), 30 steps" in err1, err1


def test_a_host_killed_before_its_first_upload_is_missing(gcs: dict[str, str],
                                                          tmp_path: Path) -> None:
    """Three hosts by the launcher (TPU_WORKER_HOSTNAMES); host 2 is killed before its first
    upload: the bucket has no part of it, yet the report names it missing and check fails."""
    url = f"gs://{BUCKET}/lost-{os.getpid()}"
    marker = tmp_path / "host2-at-step-2"
    launcher = {"TPU_WORKER_HOSTNAMES": "pod-w-0,pod-w-1,pod-w-2"}
    lost = _start(gcs, tmp_path, 2, url, "--steps", "8", "--hang-host", "2", "--hang-at", "2",
                  "--marker", str(marker), LAZYSCOPE_UPLOAD_SECONDS="1000", **launcher)
    _wait_for(marker)
    lost.send_signal(signal.SIGKILL)
    lost.wait(timeout=30)
    procs = [_start(gcs, tmp_path, h, url, "--steps", "8", **launcher) for h in (0, 1)]
    for h, p in enumerate(procs):
        assert p.wait(timeout=300) == 0, (tmp_path / f"host{h}.log").read_text()
    report = _report(gcs, tmp_path, url)
    assert [(r["host"], r["status"], r["steps"]) for r in report["hosts"]] == [
        (0, "ok", 8), (1, "ok", 8), (2, "missing", 0)]
    (missing,) = [f for f in report["findings"] if f.get("diverges") == "missing"]
    assert (missing["host"], missing["expected"]) == (2, 3)
    assert missing["expected_from"] == "TPU_WORKER_HOSTNAMES on host 0"
    assert report["status"] == "incomplete"
    reader = {**gcs, "XDG_CACHE_HOME": str(tmp_path / "reader")}
    text = lazyscope_cmd("report", url, env=reader)
    assert "host 2 of the 3 expected (TPU_WORKER_HOSTNAMES on host 0) has no part" in text.stdout
    assert text.stdout.rstrip().splitlines()[-1].startswith(
        "verdict: 2 of 3 hosts (host 2 missing); host 0: ")
    check = lazyscope_cmd("check", url, env=reader)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "FAIL no-host-divergence" in check.stdout and "host 2 of the 3 expected" in check.stdout
    # the user says the pod is two hosts: nothing is missing
    two = lazyscope_cmd("check", url, "--hosts", "2", env=reader)
    assert two.returncode == 0, two.stdout + two.stderr


def test_tensorboard_shows_every_host_and_each_host_its_url(gcs: dict[str, str],
                                                            tmp_path: Path) -> None:
    """Two hosts, host 1 compiling a graph of its own from step 3, no --profile: each host's
    report is headed by its part's URL; TensorBoard has a run per host with its own scalars
    (host 1's extra compilation is there), and no profile link."""
    from tests.integration.test_tensorboard import _get

    url = f"gs://{BUCKET}/tb-{os.getpid()}"
    procs = [_start(gcs, tmp_path, h, url, "--steps", "6", "--odd-host", "1", "--odd-step", "3")
             for h in (0, 1)]
    for h, p in enumerate(procs):
        assert p.wait(timeout=300) == 0, (tmp_path / f"host{h}.log").read_text()
        log = (tmp_path / f"host{h}.log").read_text()
        assert f"\nlazyscope report: {url}/host{h}\n" in log, log[:400]
        assert "spool" not in log
    port = _free_port()
    env = {**os.environ, **gcs, "XDG_CACHE_HOME": str(tmp_path / "reader"), "PYTHONPATH":
           os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    server = subprocess.Popen([sys.executable, "-m", "lazyscope", "tensorboard", "--port",
                               str(port), url], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(server.stdout.readline, "")),  # type: ignore[union-attr]
                     daemon=True).start()
    try:
        deadline = time.monotonic() + 120
        while len(lines) < 5 and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.5)
        said = "".join(lines)
        assert "  hosts:               host0, host1 (a TensorBoard run each" in said, said
        assert "profile:             none captured" in said and "#profile" not in said
        base = f"http://127.0.0.1:{port}"
        tags = json.loads(_get(f"{base}/data/plugin/scalars/tags"))
        assert {"host0", "host1"} <= set(tags), tags
        compiled = {}
        for run in ("host0", "host1"):
            points = json.loads(_get(f"{base}/data/plugin/scalars/scalars?run={run}"
                                     "&tag=lazyscope/compilations"))
            compiled[run] = sum(p[2] for p in points)
        assert compiled["host1"] == compiled["host0"] + 1, compiled
    finally:
        server.terminate()
        server.wait(timeout=30)
