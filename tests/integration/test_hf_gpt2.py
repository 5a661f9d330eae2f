"""The hf-gpt2 scenario: a transformers GPT-2 built from code, traced on real torch_xla (XLA:CPU)
in fresh processes with small settings; its batch builder and argument checks without a model.

Skipped as a whole when transformers is not installed (``pip install 'lazyscope[hf]'``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytest.importorskip("transformers")

SCENARIO = REPO / "scenarios" / "hf_gpt2.py"
SMALL = ["--max-len", "32", "--batch", "4"]
STEPS = 3


def _load() -> Any:
    """The scenario module, loaded by path as the CLI loads it (not put in sys.modules)."""
    spec = importlib.util.spec_from_file_location("_test_hf_gpt2", SCENARIO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _annotations(run_dir: Path) -> list[dict]:
    lines = (run_dir / "annotations.jsonl").read_text().splitlines()
    return sorted((json.loads(ln) for ln in lines if ln.strip()), key=lambda a: a["step"])


@pytest.fixture(scope="module")
def hf_runs(tmp_path_factory) -> dict[str, Path]:
    """`lazyscope trace hf-gpt2` with --padding max and longest, STEPS training steps each."""
    base = tmp_path_factory.mktemp("hf_gpt2")
    runs = {}
    for policy in ("max", "longest"):
        out = base / policy
        proc = lazyscope_cmd("trace", "--steps", str(STEPS), "--out", str(out), "--no-views",
                             "hf-gpt2", "--padding", policy, *SMALL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"hf-gpt2 tiny train padding={policy}" in proc.stdout
        runs[policy] = out
    return runs


@pytest.mark.xla
@pytest.mark.slow
def test_pad_to_max_runs_one_graph_shape(hf_runs) -> None:
    run = hf_runs["max"]
    summary = report_json(run)
    assert summary["status"] == "ok" and summary["steps"] == STEPS
    ann = _annotations(run)
    assert [a["step"] for a in ann] == list(range(STEPS))
    assert {a["seq_len"] for a in ann} == {32}
    for a in ann:
        assert a["rows"] == 4 and len(a["lengths"]) == 4
        assert a["real_tokens"] == sum(a["lengths"]) and a["computed_tokens"] == 4 * 32
        assert a["batch_max_len"] == max(a["lengths"]) <= 32
    assert not [f for f in summary["findings"] if f["kind"] == "recompile"]
    # the graphs (AdamW's first step differs from the next) are all compiled by step 1
    assert summary["per_step"][-1]["compiles"] == 0
    info = json.loads((run / "meta.json").read_text())["info"]
    assert info["scenario"] == "hf-gpt2" and info["policy"] == "max" and info["buckets"] == [32]
    assert (info["dim"], info["layers"], info["heads"], info["max_len"], info["batch"]) == (
        64, 2, 4, 32, 4)
    assert info["attention"] in ("sdpa", "eager") and info["params"] > 0


@pytest.mark.xla
@pytest.mark.slow
def test_pad_to_longest_runs_several_shapes(hf_runs) -> None:
    run = hf_runs["longest"]
    summary = report_json(run)
    assert summary["status"] == "ok" and summary["steps"] == STEPS
    ann = _annotations(run)
    assert all(a["seq_len"] == a["batch_max_len"] for a in ann)
    shapes = [a["seq_len"] for a in ann]
    assert len(set(shapes)) >= 2
    # every step padded to a new length compiles
    seen: set[int] = set()
    for a, step in zip(ann, summary["per_step"], strict=True):
        if a["seq_len"] not in seen:
            assert step["compiles"] > 0, step
        seen.add(a["seq_len"])
    # with 4 rows of lengths up to 31 the longest is 29..31: three shapes, each compiled once
    # and then reused, which the report says (a finding only when new lengths keep coming)
    said = summary["findings"] + summary["notes"]
    assert any(f["kind"] in ("recompile", "reuse") and any(
        v["dim"] == 1 and len(v["values"]) >= 2 for v in f.get("varying") or [])
        for f in said), said
    assert summary["compiles"] > report_json(hf_runs["max"])["compiles"]


def test_packed_positions_restart_per_document() -> None:
    import torch

    mod = _load()
    rows = [[3, 2], [4], [1, 1, 1]]
    batch = mod.make_batch(rows, 6, 16, torch.Generator().manual_seed(0), packed=True)
    assert batch.packed and batch.attention_mask is None and batch.lengths == [3, 2, 4, 1, 1, 1]
    assert batch.position_ids.tolist() == [[0, 1, 2, 0, 1, 0],  # tail padding restarts too
                                           [0, 1, 2, 3, 0, 1],
                                           [0, 0, 0, 0, 1, 2]]
    assert batch.doc_ids.tolist() == [[0, 0, 0, 1, 1, -1], [0, 0, 0, 0, -1, -1],
                                      [0, 1, 2, -1, -1, -1]]
    real = batch.doc_ids >= 0
    # labels: the tokens themselves, -100 on padding and on each document's first token (no
    # document learns to predict the next one: DataCollatorWithFlattening's separator)
    starts = real & (batch.position_ids == 0)
    assert (batch.labels[starts] == -100).all() and (batch.labels[~real] == -100).all()
    inner = real & ~starts
    assert torch.equal(batch.labels[inner], batch.input_ids[inner])
    assert (batch.input_ids[real] >= 1).all()
    x = mod.model_inputs(batch, torch.device("cpu"))
    assert "attention_mask" not in x and x["use_cache"] is False
    assert torch.equal(x["position_ids"], batch.position_ids)

    # rows from the real packer: every document starts at position 0 and counts up
    from lazyscope.core.padding import Packer, length_stream

    packer = Packer(length_stream(0, 32, None), 4, 32)
    for _ in range(3):
        docs = [[n for _, n in row] for row in packer.next_rows()]
        b = mod.make_batch(docs, 32, 1024, torch.Generator().manual_seed(1), packed=True)
        for r, row in enumerate(docs):
            expect = [i for n in row for i in range(n)]
            assert b.position_ids[r, :len(expect)].tolist() == expect
        assert sum(b.lengths) == sum(map(sum, docs)) <= 4 * 32

    # padded batches: one document per row, right padding, an attention mask
    padded = mod.make_batch([[3], [5]], 5, 16, torch.Generator().manual_seed(0))
    assert padded.attention_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert "position_ids" not in mod.model_inputs(padded, torch.device("cpu"))


def test_document_mask_probe_matches_transformers() -> None:
    """The run's note is the probe's answer: a transformers with
    masking_utils.find_packed_sequence_indices masks the documents of a packed row apart."""
    mod = _load()
    honoured = mod.document_mask_honoured("sdpa")
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
    except ImportError:
        assert honoured in (True, False)
    else:
        assert honoured is True
    assert "attends across documents" in mod.packed_note(False, "sdpa", "x")


def test_bad_arguments_fail_before_importing_transformers(tmp_path: Path) -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('s', {str(SCENARIO)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "m.parse_args(['--padding', 'bucket:auto', '--max-len', '32'])\n"
        "try:\n"
        "    m.parse_args(sys.argv[1:])\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code)\n"
        "print('transformers' in sys.modules, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code, "--padding", "bogus"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["exit", "2", "False", "False"], proc.stdout + proc.stderr
    assert "unknown padding policy 'bogus'" in proc.stderr
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("5\n40\n")
    proc = subprocess.run([sys.executable, "-c", code, "--lengths", str(lengths),
                           "--max-len", "32"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split()[:2] == ["exit", "2"]
    assert "--lengths holds length 40 > max length 32" in proc.stderr

    bad = lazyscope_cmd("trace", "--out", str(tmp_path / "run"), "hf-gpt2",
                        "--padding", "bucket:1,zz")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "lazyscope: bad arguments for scenario hf-gpt2: argument --padding: malformed bucket "
        "list 'bucket:1,zz': expected bucket:B1,B2,... with integers"
    ]
    assert not (tmp_path / "run").exists()


def test_without_transformers_one_line_and_exit_4(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "transformers.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'transformers'\", name='transformers')\n")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": f"{shadow}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, str(SCENARIO), "--backend", "eager", "--steps", "1"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "lazyscope: hf-gpt2 needs transformers: pip install 'lazyscope[hf]'"]
    traced = lazyscope_cmd("trace", "--backend", "eager", "--steps", "1", "--out",
                           str(tmp_path / "run"), "hf-gpt2", env={"PYTHONPATH": f"{shadow}{os.pathsep}{REPO}"})
    assert traced.returncode == 4, traced.stdout + traced.stderr
    lines = traced.stderr.strip().splitlines()
    assert len(lines) == 1 and "hf-gpt2 needs transformers: pip install 'lazyscope[hf]'" in lines[0]
