"""LazyscopeCallback in a real transformers Trainer on XLA:CPU (a tiny GPT-2 from its config,
random tokens, 6 optimizer steps: tests/programs/hf_trainer.py). The same script is traced by
`lazyscope trace` and run with the callback: the callback run's steps are the Trainer's
optimizer steps, each annotated with its batch's shape, and its findings are those of
`lazyscope trace`. A second training in the same process (gradient accumulation, a logging sync
per two steps) is a second trace: still one step per optimizer step, compilation causes
recorded. All Trainer runs are made once, in the module fixture (two fresh processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytest.importorskip("transformers")
pytestmark = [pytest.mark.xla, pytest.mark.slow]

SCRIPT = REPO / "tests" / "programs" / "hf_trainer.py"
STEPS = 6


@pytest.fixture(scope="module")
def trainer_runs(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("hf_callback")
    cli, cb, cb2 = base / "cli", base / "callback", base / "callback_ga"

    def traced() -> subprocess.CompletedProcess[str]:
        return lazyscope_cmd("trace", "--out", str(cli), "--no-views", str(SCRIPT), cwd=base)

    def with_callback() -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO),
               "LAZYSCOPE_CALLBACK_OUT": str(cb), "LAZYSCOPE_CALLBACK_OUT2": str(cb2)}
        return subprocess.run([sys.executable, str(SCRIPT)], cwd=base, env=env,
                              capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.submit(traced), pool.submit(with_callback)
        proc_cli, proc_cb = a.result(), b.result()
    assert proc_cli.returncode == 0, proc_cli.stdout + proc_cli.stderr
    assert proc_cb.returncode == 0, proc_cb.stdout + proc_cb.stderr
    trained = [json.loads(line.split(" ", 1)[1]) for line in proc_cb.stdout.splitlines()
               if line.startswith("TRAINED ")]
    assert [t["run"] for t in trained] == [str(cb), str(cb2)]
    return {"cli": (cli, report_json(cli)), "callback": (cb, report_json(cb)),
            "callback_ga": (cb2, report_json(cb2)),
            "global_steps": [t["global_step"] for t in trained]}


def _annotations(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "annotations.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda r: r["step"])


def _finding(f: dict) -> tuple:
    return (f["kind"], f["file"], f["line"], f["function"], f["count"],
            json.dumps(f["stack"]), json.dumps(f.get("compiled_at")),
            json.dumps(f.get("changes")))


def test_steps_are_the_trainers_optimizer_steps(trainer_runs) -> None:
    run, report = trainer_runs["callback"]
    assert trainer_runs["global_steps"][0] == STEPS
    assert report["status"] == "ok" and report["steps"] == STEPS
    assert report["target_kind"] == "api"
    assert report["target"] == "transformers Trainer (GPT2LMHeadModel)"
    ann = _annotations(run)
    assert [a["step"] for a in ann] == list(range(STEPS))
    assert [a["trainer_step"] for a in ann] == list(range(1, STEPS + 1))
    # batch 2 x 16 tokens, read from input_ids' shape
    assert {(a["rows"], a["seq_len"], a["computed_tokens"]) for a in ann} == {(2, 16, 32)}
    # traced from outside, the first batch fetch ends a step of set-up work of its own
    assert trainer_runs["cli"][1]["steps"] == STEPS + 1
    info = json.loads((run / "meta.json").read_text())["info"]
    assert info["trainer"]["max_steps"] == STEPS and info["trainer"]["optim"] == "adamw_torch"


def test_findings_equal_those_of_lazyscope_trace(trainer_runs) -> None:
    cli = trainer_runs["cli"][1]
    cb = trainer_runs["callback"][1]
    assert cli["findings"], "the planted program has a finding to compare"
    assert [_finding(f) for f in cb["findings"]] == [_finding(f) for f in cli["findings"]]
    assert [(n["kind"], n["file"], n["line"], n["count"]) for n in cb["notes"]] == \
        [(n["kind"], n["file"], n["line"], n["count"]) for n in cli["notes"]]
    for key in ("compiles", "distinct_graphs", "syncs", "executions",
                "transfers_from_device"):
        assert cb[key] == cli[key], key
    # every graph explained: causes from PT_XLA_DEBUG, inputs from the HLO dump
    assert all(r["cause"] and not r["cause"].startswith("unknown") for r in cb["compilations"])


def test_second_training_in_one_process(trainer_runs) -> None:
    run, report = trainer_runs["callback_ga"]
    assert trainer_runs["global_steps"][1] == STEPS
    assert report["status"] == "ok" and report["steps"] == STEPS
    ann = _annotations(run)
    assert [a["trainer_step"] for a in ann] == list(range(1, STEPS + 1))
    # two micro-batches per optimizer step, counted by shape
    assert {(a["rows"], a["computed_tokens"]) for a in ann} == {(4, 64)}
    assert report["compilations"] and all(
        not r["cause"].startswith("unknown") for r in report["compilations"])
    assert (run / "xla_debug.txt").stat().st_size > 0
    # logging every 2 steps reads the loss: a host sync at the Trainer's logging steps
    reads = [g for g in report["events"] if g["kind"] == "sync"]
    assert reads


def test_callback_run_exports(trainer_runs, tmp_path: Path) -> None:
    """The callback's run is a normal run: every command reads it."""
    run = trainer_runs["callback"][0]
    proc = lazyscope_cmd("export", str(run), "--format", "csv", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    pd = pytest.importorskip("pandas")
    steps = pd.read_csv(tmp_path / "steps.csv")
    assert (steps["kind"] == "step").sum() == STEPS
    assert steps["trainer_step"].dropna().astype(int).tolist() == list(range(1, STEPS + 1))


def _line_of(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_a_trainer_is_healthy_and_its_per_step_read_is_named_in_transformers(
        trainer_runs) -> None:
    """Issue 20 on a real Trainer: every graph compiled once and reused is warm-up (no recompile
    finding, check passes); the read GPT-2's mask code makes every step is reported at the
    user's trainer.train() line and at the transformers line where it happens; lazyscope's
    counts are torch_xla's own."""
    run, report = trainer_runs["cli"]
    assert not [f for f in report["findings"] if f["kind"] == "recompile"]
    assert lazyscope_cmd("check", str(run)).returncode == 0
    counts = report["runtime_counts"]
    assert counts["CompileTime"] == report["compiles"]
    assert counts["ExecuteTime"] == report["executions"]
    [mask] = [f for f in report["findings"] if f["kind"] == "sync" and f.get("happens_at")
              and f["happens_at"]["file"].endswith("transformers/masking_utils.py")]
    assert mask["happens_at"]["function"] == "find_packed_sequence_indices"
    assert (Path(mask["file"]).name, mask["line"]) == (SCRIPT.name, _line_of("trainer.train()"))
    assert mask["count"] >= STEPS and "use_cache=True" in mask["fix"]


def test_trainers_logging_reads_are_another_cause_named_where_transformers_calls(
        trainer_runs) -> None:
    """Logging every 2 steps (the second training): Trainer gathers the loss with xm.mesh_reduce.
    Its reads are a cause of their own, at transformers' call of the API, not merged with the
    mask reads and not blamed on a call of the user's. They come every 2 steps, after the
    step's barrier: priced as a note (a finding when they cost the run), whose fix is the
    Trainer's own setting, never "call it every N steps"."""
    _, report = trainer_runs["callback_ga"]
    syncs = [f for f in report["findings"] + report["notes"] if f["kind"] == "sync"]
    [logging] = [f for f in syncs if f.get("api") == "xm.mesh_reduce"]
    assert "/transformers/" in logging["happens_at"]["file"]
    assert "reads every 2 steps" in logging["detail"]
    assert "logging_steps" in logging["fix"] and "call it every N steps" not in logging["fix"]
    assert any(f is not logging and f.get("happens_at", {}).get("function")
               == "find_packed_sequence_indices" for f in syncs)
