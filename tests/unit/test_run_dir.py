"""A run directory owned by one live trace (store/lock.py, store/rundir.py) and a writer that
survives what the program does to the process (store/writer.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.core.errors import RunDirError
from lazyscope.model import STEP_FIELDS, Meta
from lazyscope.store import AppendLog, RunWriter, load_run, prepare_run_dir
from lazyscope.store.lock import writer_of
from tests.builders import build_run

REPO = Path(__file__).resolve().parents[2]


def _steps(n: int) -> list[dict[str, float]]:
    return [{f: 0.0 for f in STEP_FIELDS} | {"wall_s": 0.01} for _ in range(n)]


def test_a_live_run_is_never_shared_nor_replaced(tmp_path: Path) -> None:
    first = prepare_run_dir(tmp_path / "r", force=False, command="lazyscope trace a.py")
    assert writer_of(tmp_path / "r")["command"] == "lazyscope trace a.py"
    for force in (False, True):
        with pytest.raises(RunDirError, match=rf"r is being written by pid {os.getpid()} "
                                              r"\(lazyscope trace a\.py, since "):
            prepare_run_dir(tmp_path / "r", force=force)
    first.close()
    assert writer_of(tmp_path / "r") is None  # the lock file stays, held by nobody
    prepare_run_dir(tmp_path / "r", force=True).close()


def test_a_lock_held_by_another_process_names_it(tmp_path: Path) -> None:
    code = ("import sys, time\nfrom lazyscope.store import prepare_run_dir\n"
            f"prepare_run_dir({str(tmp_path / 'r')!r}, False, command='other')\n"
            "print('locked', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=rf"being written by pid {proc.pid} \(other"):
            prepare_run_dir(tmp_path / "r", force=True)
    finally:
        proc.kill()
        proc.wait()
    # killed: the kernel released its lock
    prepare_run_dir(tmp_path / "r", force=True).close()


def test_a_default_name_is_made_exclusively(tmp_path: Path) -> None:
    a = prepare_run_dir(tmp_path / "runs" / "p-1", False, unique=True)
    b = prepare_run_dir(tmp_path / "runs" / "p-1", False, unique=True)
    assert (a.path.name, b.path.name) == ("p-1", "p-1-2")
    a.close()
    b.close()


def test_force_replaces_only_what_lazyscope_wrote(tmp_path: Path) -> None:
    build_run(tmp_path / "r" / "rank0", steps=_steps(2))
    (tmp_path / "r" / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match=r"holds files lazyscope did not write \(notes\.txt\)"):
        prepare_run_dir(tmp_path / "r", force=True)
    (tmp_path / "r" / "notes.txt").unlink()
    (tmp_path / "r" / "rank0" / "timeline.png").write_bytes(b"png")
    prepare_run_dir(tmp_path / "r", force=True).close()
    assert [p.name for p in (tmp_path / "r").iterdir()] == [".lock"]


def test_force_never_deletes_the_script_being_traced(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
    (tmp_path / "r" / "train.py").write_text("pass\n")
    with pytest.raises(RunDirError, match=r"holds .*train\.py, which this trace needs"):
        prepare_run_dir(tmp_path / "r", force=True, protect=(tmp_path / "r" / "train.py",))
    assert (tmp_path / "r" / "train.py").is_file()


def test_a_big_meta_json_is_still_a_run(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    (tmp_path / "r" / "meta.json").write_text(json.dumps({**meta, "error": "x" * (5 << 20)}))
    prepare_run_dir(tmp_path / "r", force=True).close()


def test_the_writer_follows_its_directory_not_the_working_directory(tmp_path: Path,
                                                                     monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rd = prepare_run_dir(Path("r"), False)
    writer = RunWriter(rd.path, Meta(target="t"), run_dir=rd)
    writer.write_step(0, {"wall_s": 0.1})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    os.rename(tmp_path / "r", tmp_path / "moved")
    writer.write_step(1, {"wall_s": 0.1})
    assert writer.where() == tmp_path / "moved"
    writer.finish("ok")
    run = load_run(tmp_path / "moved")
    assert len(run.steps) == 2 and run.meta.status == "ok"
    assert not (tmp_path / "elsewhere" / "r").exists()


def test_files_are_readable_whatever_umask_the_program_sets(tmp_path: Path) -> None:
    old = os.umask(0o777)
    try:
        writer = RunWriter(tmp_path / "r", Meta(target="t"))
        writer.write_step(0, {"wall_s": 0.1})
        writer.finish("ok")
    finally:
        os.umask(old)
    for name in ("meta.json", "steps.bin", "events.bin", "intern.jsonl"):
        assert (tmp_path / "r" / name).stat().st_mode & 0o444, name


def test_a_log_never_truncates_a_descriptor_the_program_reused(tmp_path: Path) -> None:
    """The program closes lazyscope's descriptor and opens its own file under the same
    number: closing the log truncates its own file (reopened by name), not the program's."""
    log = AppendLog(tmp_path / "events.bin")
    log.append(b"a" * 100)
    number = log._fd
    mine = tmp_path / "mine.txt"
    mine.write_bytes(b"precious" * 200)
    fd = os.open(mine, os.O_RDWR)
    os.dup2(fd, number)
    os.close(fd)
    log.append(b"b" * (1 << 16))  # through a descriptor of its own
    log.close()
    assert mine.read_bytes() == b"precious" * 200
    assert (tmp_path / "events.bin").read_bytes() == b"a" * 100 + b"b" * (1 << 16)
    os.close(number)


def test_a_forked_child_never_writes_or_finalises_its_parents_run(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "r", Meta(target="t"))
    writer.write_step(0, {"wall_s": 0.1})
    pid = os.fork()
    if pid == 0:  # the child: what its normal end would do
        try:
            writer.write_step(1, {"wall_s": 0.1})
            writer.finish("ok")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    writer.write_step(1, {"wall_s": 0.2})
    writer.finish("ok")
    run = load_run(tmp_path / "r")
    assert [round(w, 1) for w in run.steps.values("wall_s")] == [0.1, 0.2]


def test_a_run_still_being_written_gives_the_report_so_far(tmp_path: Path, capsys) -> None:
    """`report` of a live run: the report so far, marked (text's first line, JSON's
    being_written_by, status running); `check` refuses it unless --allow-incomplete; no view is
    written into it. Once its writer finishes it is an ordinary run."""
    from lazyscope.cli import main

    rd = prepare_run_dir(tmp_path / "r", False, command="lazyscope trace a.py")
    writer = RunWriter(rd.path, Meta(target="a.py", backend="xla"), run_dir=rd)
    for i, values in enumerate(_steps(3)):
        writer.write_step(i, values)
    me, r = f"pid {os.getpid()} (", str(tmp_path / "r")
    assert main(["report", r]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith(f"run still being written by {me}"), out
    assert first.endswith("): the report so far") and "  status      running" in out
    assert "verdict: run still being written (3 steps so far): " in out
    assert main(["report", r, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "running" and data["being_written_by"].startswith(me)
    assert main(["check", r]) == 1
    assert "FAIL run-status: the run is still being written by " in capsys.readouterr().out
    assert main(["check", "--allow-incomplete", r]) == 0
    assert main(["report", r, "--format", "html"]) == 3
    assert "is still being written by" in capsys.readouterr().err
    assert not (tmp_path / "r" / "report.html").exists()
    writer.finish("ok")
    rd.close()
    assert main(["report", r]) == 0
    out = capsys.readouterr().out
    assert out.startswith("lazyscope report: ") and "status      ok" in out
