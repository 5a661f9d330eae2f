"""Runs at a URL when the bucket, the server, the host identity or the local spool is wrong
(issue 50): real `lazyscope trace` processes against a real GCS API server
(gcp-storage-emulator, the session's, from test_pod), small programs on ``--backend eager``.

Each fault is one ``lazyscope:`` line, its documented exit code, before the program starts when
the URL cannot be written (the program's own marker file is never made), and nothing recorded
lost: two traces with one host index never both write a part (one is refused), a failed run's
line names where its part is, in the bucket.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import GCS_BUCKET as BUCKET
from tests.conftest import REPO, lazyscope_cmd

pytest.importorskip("gcsfs", reason="the gcs extra (pip install 'lazyscope[gcs]')")

EAGER = ("--backend", "eager", "--device", "cpu")

PROGRAM = """\
import os, sys, time
import lazyscope

open(os.environ["LS_MARKER"], "w").close()  # the program ran
for i in range(int(os.environ.get("LS_STEPS", "4"))):
    time.sleep(float(os.environ.get("LS_SLEEP", "0")))
    lazyscope.barrier()
    if os.environ.get("LS_FAIL") == str(i):
        raise RuntimeError("the program failed at step %d" % i)
"""


def _env(gcs: dict[str, str], tmp: Path, host: str | None = "0", **extra: str) -> dict[str, str]:
    env = {**gcs, "XDG_CACHE_HOME": str(tmp / "cache"), "LAZYSCOPE_SPOOL": "",
           "LS_MARKER": str(tmp / "ran"), **extra}
    if host is not None:
        env.setdefault("CLOUD_TPU_TASK_ID", host)
    return env


def _program(tmp: Path) -> str:
    path = tmp / "prog.py"
    path.write_text(PROGRAM)
    return str(path)


def _trace(gcs: dict[str, str], tmp: Path, url: str, *options: str,
           **extra: str) -> subprocess.CompletedProcess[str]:
    return lazyscope_cmd("trace", "-q", *EAGER, *options, "--out", url, _program(tmp),
                         env=_env(gcs, tmp, **extra), timeout=300)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("lazyscope: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def _objects(gcs: dict[str, str], prefix: str) -> list[str]:
    code = ("import gcsfs, json, sys\nfs = gcsfs.GCSFileSystem(token='anon')\n"
            "try:\n    print(json.dumps(sorted(fs.find(sys.argv[1]))))\n"
            "except FileNotFoundError:\n    print('[]')\n")
    out = subprocess.run([sys.executable, "-c", code, prefix], capture_output=True, text=True,
                         env={**os.environ, **gcs}, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def _spools(tmp: Path) -> list[Path]:
    root = tmp / "cache" / "lazyscope" / "spool"
    return sorted(root.iterdir()) if root.is_dir() else []


@pytest.mark.parametrize(("url", "code", "line"), [
    ("gs://no-such-bucket-50/run", 3,
     "lazyscope: cannot write gs://no-such-bucket-50/run: the bucket no-such-bucket-50 does not "
     "exist (or these credentials cannot see it)"),
    ("gs:///run", 2, "lazyscope: gs:///run names no bucket: write gs://BUCKET/RUN"),
    ("gs://", 2, "lazyscope: gs:// names no bucket: write gs://BUCKET/RUN"),
])
def test_a_url_that_cannot_be_written_is_refused_before_the_program_starts(
        gcs: dict[str, str], tmp_path: Path, url: str, code: int, line: str) -> None:
    proc = _trace(gcs, tmp_path, url)
    assert proc.returncode == code and _one_line(proc) == line
    assert not (tmp_path / "ran").exists()  # the program never ran
    assert not _spools(tmp_path) and not (tmp_path / "gs:").exists()
    if code == 2:  # a reader says the same
        report = lazyscope_cmd("report", url, env=_env(gcs, tmp_path))
        assert report.returncode == 2 and _one_line(report) == line


def test_an_unreachable_server_is_one_line(gcs: dict[str, str], tmp_path: Path) -> None:
    """gcsfs retries (about 35 s) and logs each retry's traceback on stderr: none of it shows."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = {**gcs, "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"}
    proc = _trace(down, tmp_path, f"gs://{BUCKET}/down")
    assert proc.returncode == 3, proc.stderr
    line = _one_line(proc)
    assert line.startswith(f"lazyscope: cannot write gs://{BUCKET}/down: the storage server does "
                           "not answer (Cannot connect to host 127.0.0.1:"), line
    assert not (tmp_path / "ran").exists() and not _spools(tmp_path)


@pytest.mark.parametrize(("env", "line"), [
    ({"CLOUD_TPU_TASK_ID": "abc"},
     "lazyscope: CLOUD_TPU_TASK_ID (the host index): 'abc' is not a whole number"),
    ({"CLOUD_TPU_TASK_ID": "-1"},
     "lazyscope: CLOUD_TPU_TASK_ID (the host index): '-1' is out of range: from 0 to 1,048,576"),
    ({"CLOUD_TPU_TASK_ID": "\u00b2"}, "lazyscope: CLOUD_TPU_TASK_ID (the host index): '\u00b2' "
     "is not a whole number: write it with the digits 0-9"),
    ({"LAZYSCOPE_UPLOAD_SECONDS": "inf"},
     "lazyscope: LAZYSCOPE_UPLOAD_SECONDS: 'inf' is not a number: a finite value is needed"),
    ({"LAZYSCOPE_UPLOAD_SECONDS": "1e309"},
     "lazyscope: LAZYSCOPE_UPLOAD_SECONDS: '1e309' is too large: a finite value is needed"),
])
def test_numbers_from_the_environment_are_refused_before_the_program_starts(
        gcs: dict[str, str], tmp_path: Path, env: dict[str, str], line: str) -> None:
    proc = _trace(gcs, tmp_path, f"gs://{BUCKET}/env-{os.getpid()}", **env)
    assert proc.returncode == 2 and _one_line(proc) == line  # never host 0, never exit 5
    assert not (tmp_path / "ran").exists()
    assert _objects(gcs, f"{BUCKET}/env-{os.getpid()}") == []


def _start(gcs: dict[str, str], tmp: Path, url: str, disk: str, *options: str,
           **extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO),
           **_env(gcs, tmp, **extra), "XDG_CACHE_HOME": str(tmp / disk)}
    return subprocess.Popen([sys.executable, "-m", "lazyscope", "trace", "-q", *EAGER, *options,
                             "--out", url, _program(tmp)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_traces_with_one_host_index_never_both_write_it(gcs: dict[str, str],
                                                            tmp_path: Path) -> None:
    """Started together (each on its own disk), both host 0: the bucket keeps one claim, the
    other trace is refused before its program starts; the part holds the winner's steps."""
    url = f"gs://{BUCKET}/dup-{os.getpid()}"
    procs = [_start(gcs, tmp_path, url, f"disk{i}", LS_STEPS="6", LS_SLEEP="0.2")
             for i in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 3], results
    refused = next(err for code, _, err in results if code == 3)
    assert refused.startswith(f"lazyscope: {url}/host0 is being written by pid "), refused
    assert "two traces with host index 0; give each host its own (CLOUD_TPU_TASK_ID)" in refused
    report = lazyscope_cmd("report", url, "--format", "json",
                           env={**gcs, "XDG_CACHE_HOME": str(tmp_path / "reader")})
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["hosts"]
    assert [(r["host"], r["steps"], r["status"]) for r in rows] == [(0, 6, "ok")]
    assert not [o for o in _objects(gcs, f"{BUCKET}/dup-{os.getpid()}") if "/.claim-" in o]
    # one after the other: refused without --force, replaced with it
    again = _trace(gcs, tmp_path, url)
    assert again.returncode == 3 and "already holds this host's part" in _one_line(again)
    forced = _trace(gcs, tmp_path, url, "--force", LS_STEPS="2")
    assert forced.returncode == 0, forced.stderr
    rows = json.loads(lazyscope_cmd("report", url, "--format", "json", env={
        **gcs, "XDG_CACHE_HOME": str(tmp_path / "reader")}).stdout)["hosts"]
    assert [(r["host"], r["steps"]) for r in rows] == [(0, 2)]


def test_a_live_part_is_not_replaced_even_with_force(gcs: dict[str, str],
                                                     tmp_path: Path) -> None:
    url = f"gs://{BUCKET}/live-{os.getpid()}"
    first = _start(gcs, tmp_path, url, "disk0", LS_STEPS="40", LS_SLEEP="0.1",
                   LAZYSCOPE_UPLOAD_SECONDS="0.3")
    deadline = time.monotonic() + 120
    while not any(o.endswith("/upload.json") for o in _objects(gcs, url[5:])):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.3)
    second = _trace(gcs, tmp_path, url, "--force")
    assert first.wait(timeout=300) == 0, first.communicate()
    assert second.returncode == 3
    assert _one_line(second).startswith(f"lazyscope: {url}/host0 is being written by pid "
                                        f"{first.pid} on ")


def test_a_failed_or_stopped_run_names_its_part_in_the_bucket(gcs: dict[str, str],
                                                             tmp_path: Path) -> None:
    """The line says where the run is (the bucket), and the spool it was written through is
    gone: never "kept in" a spool directory that the upload emptied."""
    url = f"gs://{BUCKET}/failed-{os.getpid()}"
    failed = _trace(gcs, tmp_path, url, LS_FAIL="2")
    assert failed.returncode == 5, failed.stderr
    last = [ln for ln in failed.stderr.splitlines() if ln.startswith("lazyscope: ")]
    assert len(last) == 1 and last[0].endswith(f"; the run so far is kept in {url}/host0 "
                                               "(status failed)"), failed.stderr
    assert not _spools(tmp_path)
    assert f"{BUCKET}/failed-{os.getpid()}/host0/meta.json" in _objects(gcs, url[5:])
    # SIGTERM while it runs
    url = f"gs://{BUCKET}/stopped-{os.getpid()}"
    (tmp_path / "ran").unlink()
    proc = _start(gcs, tmp_path, url, "cache", LS_STEPS="200", LS_SLEEP="0.05")
    deadline = time.monotonic() + 120
    while not (tmp_path / "ran").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    _, err = proc.communicate()
    assert code == 143, err
    assert f"terminated by SIGTERM; the run so far is kept in {url}/host0 (status " \
           "interrupted)" in err, err
    assert not _spools(tmp_path)


def test_a_spool_that_cannot_be_written_is_named(gcs: dict[str, str], tmp_path: Path) -> None:
    """LAZYSCOPE_SPOOL under a regular file (a full disk says the same through the same
    line: the spool's path and how to move it), before the program starts."""
    (tmp_path / "file").write_text("x")
    proc = _trace(gcs, tmp_path, f"gs://{BUCKET}/spool-{os.getpid()}",
                  LAZYSCOPE_SPOOL=str(tmp_path / "file" / "spool"))
    assert proc.returncode == 3
    line = _one_line(proc)
    assert line.startswith(f"lazyscope: cannot write the local spool of gs://{BUCKET}/spool-"
                           f"{os.getpid()} ({tmp_path}/file/spool/"), line
    assert line.endswith(": a part of the path is not a directory; set LAZYSCOPE_SPOOL to a "
                         "directory with room"), line
    assert not (tmp_path / "ran").exists()
    # the claim taken before the spool failed is released: the next trace is not refused
    assert not [o for o in _objects(gcs, f"{BUCKET}/spool-{os.getpid()}") if "/.claim-" in o]


def test_readers_of_a_url(gcs: dict[str, str], tmp_path: Path) -> None:
    """export, advise and report of a run at a URL: messages name the URL, never the download
    cache; export writes where --out says (a pod's tables with a host column)."""
    url = f"gs://{BUCKET}/read-{os.getpid()}"
    assert _trace(gcs, tmp_path, url).returncode == 0
    reader = {**gcs, "XDG_CACHE_HOME": str(tmp_path / "reader")}
    no_out = lazyscope_cmd("export", url, env=reader)
    assert no_out.returncode == 2 and _one_line(no_out) == (
        f"lazyscope: {url} is a run at a URL: give --out, the file or directory to write on "
        "this machine")
    csv = lazyscope_cmd("export", url, "--format", "csv", "--out", str(tmp_path / "t"),
                        env=reader)
    assert csv.returncode == 0, csv.stderr
    steps = (tmp_path / "t" / "steps.csv").read_text().splitlines()
    assert steps[0].startswith("host,step,")
    assert [ln.split(",")[:3] for ln in steps[1:5]] == [["0", str(i), "step"] for i in range(4)]
    trace_json = lazyscope_cmd("export", url, "--out", str(tmp_path / "t.json"), env=reader)
    assert trace_json.returncode == 0 and json.loads((tmp_path / "t.json").read_text())
    advise = lazyscope_cmd("advise", url, env=reader)
    assert advise.returncode == 2
    assert _one_line(advise).startswith(f"lazyscope: {url}: nothing to advise on: ")
    # a part whose meta.json was deleted
    code = ("import gcsfs, sys\nfs = gcsfs.GCSFileSystem(token='anon')\n"
            "fs.rm(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, f"{url[5:]}/host0/meta.json"], check=True,
                   env={**os.environ, **gcs}, timeout=120)
    report = lazyscope_cmd("report", url, env=reader)
    assert report.returncode == 3 and _one_line(report) == (
        f"lazyscope: {url}/host0 is not a lazyscope run: it has no meta.json")
    assert "download" not in report.stderr
