"""The decoder scenario on real torch_xla (XLA:CPU), traced in fresh processes, small settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.xla

DECODER = REPO / "scenarios" / "decoder"
SMALL = ["--max-len", "32", "--batch", "4", "--mode", "eval"]


def _steps(run_dir: Path) -> list[dict]:
    """Each barrier step's annotations (the scenario's ``lazyscope.annotate_step``) and its
    compile count, as saved in the run directory."""
    run = load_run(run_dir)
    return [{"extra": st.annotations, "compiles": st.compile_count} for st in run.steps]


@pytest.fixture(scope="session")
def decoder_runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("decoder")
    runs = {}
    auto = ["--batching", "grouped", "--horizon", "100000", "--max-buckets", "3"]
    for name, policy, more in (("longest", "longest", []), ("bucket", "bucket:16", []),
                               ("auto", "bucket:auto", auto)):
        out = base / name
        proc = lazyscope_cmd("trace", "--steps", "6", "--out", str(out), "--no-views", "decoder",
                             "--padding", policy, *SMALL, *more)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name] = out
    return runs


def test_longest_compiles_once_per_distinct_batch_length(decoder_runs) -> None:
    steps = _steps(decoder_runs["longest"])
    assert len(steps) == 6
    assert all(s["extra"]["seq_len"] == s["extra"]["batch_max_len"] for s in steps)
    shapes = {s["extra"]["seq_len"] for s in steps}
    summary = report_json(decoder_runs["longest"])
    assert len(shapes) >= 3
    assert summary["distinct_graphs"] == len(shapes)
    # a step compiles exactly when its length is new
    seen: set[int] = set()
    for s in steps:
        new = s["extra"]["seq_len"] not in seen
        seen.add(s["extra"]["seq_len"])
        assert (s["compiles"] > 0) == new, s


def test_buckets_bound_the_graphs_and_advise_reads_the_run(decoder_runs) -> None:
    run = decoder_runs["bucket"]
    steps = _steps(run)
    assert {s["extra"]["seq_len"] for s in steps} <= {16, 32}
    summary = report_json(run)
    assert 1 <= summary["distinct_graphs"] <= 2
    meta = json.loads((run / "meta.json").read_text())
    assert meta["info"]["buckets"] == [16, 32] and meta["info"]["policy"] == "bucket:16"
    for s in steps:
        assert s["extra"]["real_tokens"] == sum(s["extra"]["lengths"])
        assert s["extra"]["computed_tokens"] == 4 * s["extra"]["seq_len"]
    proc = lazyscope_cmd("advise", str(run), "--max-buckets", "3", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    advice = json.loads(proc.stdout)
    assert advice["cost_model"]["calibrated"] and advice["cost_model"]["compile_s"] > 0
    assert advice["horizon"] == 100_000 and advice["horizon_from"].startswith("default")
    assert advice["lengths"]["top"] == 32 and advice["lengths"]["exact"]
    assert advice["run_policy"] == "bucket:16"
    assert [len(p["boundaries"]) for p in advice["per_k"]][0] == 1
    short = json.loads(lazyscope_cmd("advise", str(run), "--horizon", "6", "--format",
                                     "json").stdout)
    assert short["horizon"] == 6 and short["horizon_from"] == "given"


def test_help_and_bad_arguments() -> None:
    proc = subprocess.run([sys.executable, str(DECODER), "--help"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(REPO)},
                          timeout=120)
    assert proc.returncode == 0 and "--padding" in proc.stdout and "bucket:auto" in proc.stdout
    bad = lazyscope_cmd("trace", "decoder", "--padding", "bucket:1,zz")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "lazyscope: bad arguments for scenario decoder: argument --padding: malformed bucket "
        "list 'bucket:1,zz': expected bucket:B1,B2,... with integers"
    ]


def test_seed_preset_config_and_construction() -> None:
    import torch

    from lazyscope_scenarios import decoder as mod
    from lazyscope_scenarios.kit import n_params

    seed = mod.PRESETS["seed"]
    assert (seed.dim, seed.layers, seed.heads, seed.vocab, seed.max_len, seed.batch) == (
        1024, 24, 16, 1024, 1024, 32)
    tiny = mod.PRESETS["tiny"]
    assert tiny.dim <= 128 and tiny.layers <= 2
    with torch.device("meta"):
        model = mod.build_model(seed, "sdpa")
    assert len(model.blocks) == 24
    # 24 blocks of 12*d^2 + biases, embeddings, LM head: about 0.3 B parameters
    assert 300e6 < n_params(model) < 310e6


def test_bucket_auto_uses_the_advisors_buckets(decoder_runs) -> None:
    run = decoder_runs["auto"]
    meta = json.loads((run / "meta.json").read_text())
    buckets = meta["info"]["buckets"]
    # a long horizon amortises compilations: grouped batching gets several buckets, at most K
    assert 2 <= len(buckets) <= 3 and buckets[-1] == 32 and meta["info"]["advice_k"] == len(buckets)
    steps = _steps(run)
    shapes = {s["extra"]["seq_len"] for s in steps}
    assert shapes <= set(buckets)
    for s in steps:
        assert s["extra"]["seq_len"] == min(b for b in buckets if b >= s["extra"]["batch_max_len"])
    assert report_json(run)["distinct_graphs"] == len(shapes)
