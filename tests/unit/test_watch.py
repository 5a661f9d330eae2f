"""`lazyscope watch` without torch_xla: a finished run (its verdict at once, nothing written
into it), what is not a run (exit 3, one line), a run that never appears (--timeout), a live run
written by another process (the counts, then the verdict when its writer ends), and Ctrl-C
(exit 130, the run untouched)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from lazyscope.cli import main
from lazyscope.integrations.live import OnlineCheck, step_activity
from lazyscope.model import Meta
from lazyscope.store import RunWriter, load_run
from tests.builders import build_run

REPO = Path(__file__).resolve().parents[2]

#: a process that writes a run step by step (a stand-in for a trace): STEPS steps, one every
#: SLEEP seconds, the one at COMPILE_AT compiling; it holds the run's lock until it finishes
WRITER = textwrap.dedent("""\
    import sys, time
    from lazyscope.model import Meta
    from lazyscope.store import RunWriter, prepare_run_dir
    out, steps, sleep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rd = prepare_run_dir(out, False, command="lazyscope trace fake.py")
    writer = RunWriter(rd.path, Meta(target="fake.py", backend="xla"), run_dir=rd)
    print("started", flush=True)
    for i in range(steps):
        time.sleep(sleep)
        writer.write_step(i, {"wall_s": 0.01, "compile_count": 1.0 if i == 0 else 0.0,
                              "execute_count": 1.0})
    writer.finish("ok")
    rd.close()
""")


def _files(path: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir()}


def _writer(out: Path, steps: int, sleep: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(steps), str(sleep)],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def _watch(*args: str) -> subprocess.Popen[str]:
    # Ctrl-C as a terminal's user has it: the test process may ignore or block SIGINT (what
    # ran in it before: a runtime's threads, a worker of pytest-xdist), and a child inherits
    # both (Python leaves an ignored SIGINT ignored)
    return subprocess.Popen([sys.executable, "-m", "lazyscope", "watch", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=_interruptible)


def _interruptible() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_finished_run_gives_its_verdict_and_is_not_touched(data_run, capsys) -> None:
    path = data_run("dynamic20")
    before = _files(path)
    assert main(["watch", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("verdict: recompiles in steady state")
    assert "[recompile]" in out  # its finding, said as the live alert says it
    assert f"{path} ended: status ok, 20 steps" in err
    assert _files(path) == before


def test_what_is_not_a_run_is_one_line_and_exit_3(tmp_path: Path, capsys) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    (tmp_path / "f").write_text("")
    assert main(["watch", str(tmp_path / "d")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "d is not a lazyscope run" in err
    assert main(["watch", str(tmp_path / "f")]) == 3
    assert "f is not a directory" in capsys.readouterr().err


def test_a_run_that_never_appears_is_waited_for_until_the_timeout(tmp_path: Path,
                                                                  capsys) -> None:
    started = time.monotonic()
    assert main(["watch", "--timeout", "0.6", str(tmp_path / "later")]) == 3
    assert time.monotonic() - started >= 0.6
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("lazyscope watch: waiting for a run in ")
    assert err[-1].startswith("lazyscope: ") and "later: no run appeared there within 0.6 s" \
        in err[-1]
    assert not (tmp_path / "later").exists()


def test_a_live_run_is_followed_until_its_writer_ends(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "r", steps=12, sleep=0.1)
    watch = _watch(str(tmp_path / "r"), "--every", "0.3")
    out, err = watch.communicate(timeout=120)
    assert writer.wait(timeout=60) == 0
    assert watch.returncode == 0, err
    lines = err.splitlines()
    assert lines[0].startswith(f"lazyscope watch: following {tmp_path / 'r'} (written by pid "
                               f"{writer.pid} ")
    progress = [ln for ln in lines if ln.startswith("lazyscope watch: step ")]
    assert len(progress) >= 2 and progress[-1].startswith("lazyscope watch: step 12 · ")
    assert " · 1 compile · last 10 ms" in progress[-1]
    assert lines[-1].startswith(f"lazyscope watch: {tmp_path / 'r'} ended: status ok, 12 steps")
    assert out.splitlines()[-1].startswith("verdict: ")


def test_ctrl_c_stops_watching_with_130_and_touches_nothing(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "r", steps=400, sleep=0.05)
    try:
        watch = _watch(str(tmp_path / "r"))
        assert watch.stderr is not None
        assert watch.stderr.readline().startswith("lazyscope watch: following ")
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=60)
        assert watch.returncode == 130 and err.strip() == "lazyscope: interrupted"
        assert writer.poll() is None  # the trace goes on
        names = set(os.listdir(tmp_path / "r"))
    finally:
        writer.kill()
        writer.wait()
    assert names <= {"meta.json", "steps.bin", "events.bin", "intern.jsonl", ".lock"}


def test_the_steps_the_rule_looks_at(data_run) -> None:
    """step_activity gives the steps a live trace's recorder would have shown the rule (those
    that compiled, synced, fell back), and a look over a finished run's steps finds the
    report's finding, said once."""
    run = load_run(data_run("dynamic20"))
    compiled = [i for i, values, _ in step_activity(run, 0) if values["compile_count"]]
    col = run.steps.col("compile_count")
    assert col is not None and compiled == [i for i, c in enumerate(col) if c > 0]
    assert [i for i, *_ in step_activity(run, 15)] == [i for i in compiled if i >= 15]
    check = OnlineCheck(None)
    alerts = check.after_steps(run, 0)
    assert [a.finding.kind for a in alerts if a.finding] == ["recompile"]
    assert check.after_steps(run, len(run.steps)) == []


def test_a_run_that_failed_or_was_killed_exits_5_with_its_error_and_line(
        tmp_path: Path, capsys) -> None:
    steps = [{"wall_s": 0.01, "compile_count": 0.0, "execute_count": 1.0}] * 3
    build_run(tmp_path / "failed", steps=steps, status="failed", error="ValueError: boom",
              info={"error_site": {"file": "/src/train.py", "line": 12, "function": "main"}})
    assert main(["watch", str(tmp_path / "failed")]) == 5
    out, err = capsys.readouterr()
    assert f"{tmp_path / 'failed'} ended: status failed: ValueError: boom (at " \
           "/src/train.py:12), 3 steps" in err, err
    assert out.startswith("verdict: ")
    # killed: its writer gone (no lock held), its meta never finalised
    writer = RunWriter(tmp_path / "killed", Meta(target="train.py", backend="xla"))
    writer.write_step(0, steps[0])
    assert main(["watch", str(tmp_path / "killed")]) == 5
    err = capsys.readouterr().err
    assert "was not finalised: its trace was killed" in err, err
