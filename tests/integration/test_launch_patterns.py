"""The ways people run torch_xla, traced unmodified on real XLA:CPU (tests/programs/, one small
program per pattern): ``torch_xla.launch``, two ranks under a launcher that sets ``RANK``,
SPMD (``use_spmd()`` in the program, 4 CPU devices; and reading its loss right after each
step's barrier, 600 steps, which the read hook once crashed),
``torch.compile(backend="openxla")`` with its first compile in step 0, ``torch_xla.step()``, an
``xp.StepTrace`` beside the loop's own ``torch_xla.sync()`` (one of the two barriers runs
nothing: one step per iteration), ``torch_xla.compile(fn)``, eager mode, and a training loop
fed by a ``DataLoader(num_workers=2)`` whose workers are forked (Linux's default) or spawned: a
worker process never records a step or ends the parent's run.

For each: torch_xla's own counts of compilations, executions and transfers are the same traced
and untraced (each program prints them at its end), and the run's steps are the program's
barriers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.xla
PROGRAMS = REPO / "tests" / "programs"
COUNTED = ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime", "TransferToDeviceTime",
           "TransferFromDeviceTime", "EagerOpCompileTime", "EagerOpExecuteTime")
#: program -> extra environment
CASES = {
    "launch_one": {},
    "spmd": {"CPU_NUM_DEVICES": "4"},
    "spmd_reads": {"CPU_NUM_DEVICES": "4"},
    "openxla": {},
    "step_ctx": {},
    "step_trace_sync": {},
    "compiled_fn": {},
    "eager": {},
    "loader_compiled": {},
    "loader_fork": {},
    "loader_spawn": {},
}


def counts(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("COUNTS "))
    return json.loads(line[len("COUNTS "):])


def _env(extra: dict) -> dict:
    return {**os.environ, "PJRT_DEVICE": "CPU", **extra,
            "PYTHONPATH": f"{REPO}{os.pathsep}{PROGRAMS}"}


def _untraced(name: str) -> dict:
    proc = subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py")], cwd=PROGRAMS,
                          env=_env(CASES[name]), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return counts(proc.stdout)


def _traced(name: str, out: Path) -> tuple[dict, subprocess.CompletedProcess]:
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(PROGRAMS / f"{name}.py"),
                         env={**CASES[name], "PYTHONPATH": f"{REPO}{os.pathsep}{PROGRAMS}"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return counts(proc.stdout), proc


@pytest.fixture(scope="session")
def patterns(tmp_path_factory) -> dict[str, dict]:
    base = tmp_path_factory.mktemp("patterns")

    def run(name: str) -> tuple[str, dict]:
        plain = _untraced(name)
        traced, proc = _traced(name, base / name)
        return name, {"plain": plain, "traced": traced, "out": base / name,
                      "stdout": proc.stdout}

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, CASES))


@pytest.mark.parametrize("name", list(CASES))
def test_tracing_counts_what_torch_xla_counts(patterns, name) -> None:
    p = patterns[name]
    for metric in COUNTED:
        assert p["traced"][metric] == p["plain"][metric], (metric, p["traced"], p["plain"])
    assert sum(p["plain"][m] for m in COUNTED) > 0  # the program did run on XLA


@pytest.mark.parametrize("name", [n for n in CASES if n != "launch_one"])
def test_steps_are_the_programs_barriers(patterns, name) -> None:
    p = patterns[name]
    report = report_json(p["out"])
    assert report["status"] == "ok" and report["steps"] == p["plain"]["barriers"]
    compiles = p["plain"]["CompileTime"] + p["plain"]["EagerOpCompileTime"]
    assert report["compiles"] == compiles
    assert report["executions"] == (p["plain"]["ExecuteTime"] + p["plain"]["ExecuteReplicatedTime"]
                                    + p["plain"]["EagerOpExecuteTime"])
    # the report sets torch_xla's own counters for the run beside its counts
    assert report["runtime_counts"] == {m: p["plain"][m] for m in COUNTED if p["plain"][m]}


@pytest.mark.parametrize("name", ["loader_fork", "loader_spawn"])
def test_dataloader_workers_leave_the_run_to_the_traced_process(patterns, name) -> None:
    """The loop is traced to its end: every batch a step (24 samples / 4), one report printed
    (a worker that ends never finalises or reports the parent's run), the run ok and its own."""
    p = patterns[name]
    assert p["plain"]["barriers"] == 6
    assert p["stdout"].count("lazyscope report:") == 1 and p["stdout"].count("run saved") == 1
    meta = json.loads((p["out"] / "meta.json").read_text())
    assert meta["status"] == "ok" and meta["info"]["runtime_counts"]["ExecuteTime"] == 6
    assert not (p["out"] / "rank0").exists()


def test_launch_traces_its_worker_into_a_rank_directory(patterns) -> None:
    p = patterns["launch_one"]
    out: Path = p["out"]
    assert (out / "rank0" / "meta.json").is_file()
    worker = report_json(out / "rank0")
    assert worker["steps"] == p["plain"]["barriers"] and worker["status"] == "ok"
    assert worker["compiles"] == p["plain"]["CompileTime"]
    merged = report_json(out)
    assert [r["rank"] for r in merged["ranks"]] == [0]
    assert merged["findings"] == [] and merged["verdict"].startswith("1 ranks; rank 0: no recomp")
    parent = json.loads((out / "meta.json").read_text())
    assert parent["info"]["ranks"] == [0] and parent["status"] == "ok"


def test_spmd_records_its_devices_and_replicated_executions(patterns) -> None:
    p = patterns["spmd"]
    meta = json.loads((p["out"] / "meta.json").read_text())
    assert meta["info"]["spmd"] is True and meta["info"]["global_devices"] == 4
    assert p["plain"]["ExecuteReplicatedTime"] == p["plain"]["barriers"]
    report = report_json(p["out"])
    assert report["findings"] == []
    assert any(n.startswith("SPMD: one program over 4 devices") for n in report["run_notes"])


def test_openxla_first_compile_in_step_0_is_clean(patterns) -> None:
    report = report_json(patterns["openxla"]["out"])
    assert report["findings"] == [] and report["clean"]
    assert any("torch.compile is used" in n for n in report["run_notes"])


def test_eager_mode_verdict(patterns) -> None:
    report = report_json(patterns["eager"]["out"])
    assert report["verdict"].startswith("eager mode: each op is compiled and executed")
    assert report["findings"] == []
    # op compilations are no graphs: the summary says so instead of '(0 distinct graphs)'
    assert report["eager_mode"] is True
    assert "(op by op (eager mode): no graphs)" in patterns["eager"]["stdout"]
    assert "0 distinct graphs" not in patterns["eager"]["stdout"]


def test_two_ranks_under_a_launcher_write_their_own_directories(tmp_path: Path) -> None:
    """Two processes with RANK/WORLD_SIZE and the same --out (a launcher's way): no clobbering,
    no refusal; one merged report flags rank 1's extra graph; check can gate on it."""
    out = tmp_path / "ranked"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "lazyscope", "trace", "--out", str(out),
         str(PROGRAMS / "ranked.py")], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_env({}), "RANK": str(r), "WORLD_SIZE": "2"}) for r in (0, 1)]
    plain = [subprocess.Popen(
        [sys.executable, str(PROGRAMS / "ranked.py")], cwd=PROGRAMS, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**_env({}), "RANK": str(r), "WORLD_SIZE": "2"})
        for r in (0, 1)]
    for rank, (proc, untraced) in enumerate(zip(procs, plain, strict=True)):
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        traced = counts(stdout)
        assert traced["barriers"] == 4
        # each rank counts what the same rank counts untraced, and its run says so
        ustdout, ustderr = untraced.communicate(timeout=600)
        assert untraced.returncode == 0, ustderr[-2000:]
        expected = counts(ustdout)
        for metric in COUNTED:
            assert traced[metric] == expected[metric], (rank, metric, traced, expected)
        report = report_json(out / f"rank{rank}")
        assert report["steps"] == 4 and report["compiles"] == expected["CompileTime"]
        assert report["runtime_counts"] == {m: expected[m] for m in COUNTED if expected[m]}
    assert sorted(p.name for p in out.iterdir()) == ["rank0", "rank1"]
    merged = report_json(out)
    assert [(r["rank"], r["steps"]) for r in merged["ranks"]] == [(0, 4), (1, 4)]
    assert any("rank 1 compiled 1 graph the other ranks did not" in d
               for d in merged["divergence"])
    (note,) = [n for n in merged["notes"] if n["kind"] == "recompile"]
    assert note["ranks"] == [1]
    assert lazyscope_cmd("check", str(out)).returncode == 0
    gate = lazyscope_cmd("check", str(out), "--no-rank-divergence")
    assert gate.returncode == 1 and "FAIL no-rank-divergence" in gate.stdout


def test_steps_limit_stops_a_launched_worker_cleanly(tmp_path: Path) -> None:
    """--steps N under torch_xla.launch: the worker stops after N barriers, its run ends ok,
    and the program goes on after launch() (the stopped worker returns an empty result dict
    to torch_xla's spawn, which merges it; None made spawn raise)."""
    out = tmp_path / "limited"
    proc = lazyscope_cmd("trace", "--steps", "2", "--out", str(out), "--no-views",
                         str(PROGRAMS / "launch_one.py"),
                         env={"PYTHONPATH": f"{REPO}{os.pathsep}{PROGRAMS}"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    worker = report_json(out / "rank0")
    assert worker["status"] == "ok" and worker["steps"] == 2
