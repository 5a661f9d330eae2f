"""Hugging Face programs written the way transformers' example scripts write them, traced on
real XLA:CPU (tiny models from configs, a tokenizer built in code, nothing downloaded):

* ``hf_mlm_trainer.py``: ``data_collator = DataCollatorForLanguageModeling(...)`` then
  ``Trainer(..., data_collator=data_collator)``: the finding is at the line that built the
  collator, its fix only in arguments that class takes, and the advice wraps it (its masking
  kept), never replaces it;
* ``hf_seq2seq_trainer.py``: a ``DataCollatorForSeq2Seq`` padding inputs and labels separately:
  at the collator's line, and no "bucketing that works" note at the same site;
* ``hf_accelerate_glue.py``: an accelerate loop with a training (8 rows) and an evaluation (16
  rows) loader sharing one collator, and ``batch.to(device)`` on the ``BatchEncoding``: advice
  for the training loader, emitted code that keeps the batch's type;
* ``hf_generate_eval.py``: ``generate()`` with the default (growing) cache after a few training
  steps: a finding at the generate line with the static-cache fix, its ``aten::isin`` fallback
  there too; with ``--static-cache`` no finding.

For each program lazyscope's compile and execution counts are torch_xla's own, traced (the
report's runtime counts) and untraced (the program prints torch_xla's metrics). The emitted
advice is pasted into the programs and run: fewer compilations, ``check`` passes, and (in
process, on the programs' own data) the batches are the collator's apart from padding.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.xla, pytest.mark.slow]
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("torch_xla")

PROGRAMS = REPO / "tests" / "programs"
#: name -> (program, arguments)
CASES = {
    "mlm": ("hf_mlm_trainer.py", ["--steps", "8"]),
    "seq2seq": ("hf_seq2seq_trainer.py", ["--steps", "6"]),
    "accelerate": ("hf_accelerate_glue.py", ["--steps", "8", "--eval-every", "4"]),
    "generate": ("hf_generate_eval.py", ["--batches", "3", "--train-steps", "3",
                                         "--one-step"]),
    "static": ("hf_generate_eval.py", ["--batches", "3", "--train-steps", "3", "--one-step",
                                       "--static-cache"]),
}
COUNTED = ("CompileTime", "ExecuteTime")


def counts(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("COUNTS "))
    return json.loads(line[len("COUNTS "):])


def _env() -> dict:
    return {**os.environ, "PJRT_DEVICE": "CPU",
            "PYTHONPATH": os.pathsep.join([str(REPO), str(PROGRAMS)])}


def _untraced(program: str, args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, str(PROGRAMS / program), *args], cwd=PROGRAMS,
                          env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return counts(proc.stdout)


def _traced(out: Path, program: str, args: list[str]) -> tuple[dict, str]:
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(PROGRAMS / program),
                         *args, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return counts(proc.stdout), proc.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    base = tmp_path_factory.mktemp("hf")
    jobs = [(name, kind) for name in CASES for kind in ("traced", "plain")]

    def run(job: tuple[str, str]) -> tuple[tuple[str, str], object]:
        name, kind = job
        program, args = CASES[name]
        if kind == "plain":
            return job, _untraced(program, args)
        return job, (base / name, *_traced(base / name, program, args))

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(pool.map(run, jobs))
    out = {}
    for name in CASES:
        run_dir, traced, stdout = done[(name, "traced")]
        out[name] = {"dir": run_dir, "traced": traced, "plain": done[(name, "plain")],
                     "stdout": stdout, "report": report_json(run_dir)}
    return out


def _line(program: str, text: str) -> int:
    """The first line of the program's code (after its docstring, which quotes some) holding
    ``text``."""
    source = (PROGRAMS / program).read_text()
    first = ast.parse(source).body[0]
    start = (first.end_lineno or 0) if isinstance(first, ast.Expr) else 0
    return next(i for i, ln in enumerate(source.splitlines(), 1) if i > start and text in ln)


def _recompiles(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] == "recompile"]


@pytest.mark.parametrize("name", list(CASES))
def test_lazyscope_counts_what_torch_xla_counts(runs, name) -> None:
    r = runs[name]
    report = r["report"]
    for metric in COUNTED:
        assert r["traced"][metric] == r["plain"][metric], (metric, r["traced"], r["plain"])
    assert report["compiles"] == report["runtime_counts"]["CompileTime"] == \
        r["plain"]["CompileTime"]
    assert report["executions"] == report["runtime_counts"]["ExecuteTime"] == \
        r["plain"]["ExecuteTime"]
    assert r["plain"]["CompileTime"] > 0


def test_a_collator_in_a_variable_is_named_where_it_was_built_with_a_fix_it_takes(runs) -> None:
    report = runs["mlm"]["report"]
    (f,) = _recompiles(report)
    program = "hf_mlm_trainer.py"
    assert (Path(f["file"]).name, f["line"]) == (
        program, _line(program, "data_collator = DataCollatorForLanguageModeling("))
    assert f["compiled_at"]["line"] == _line(program, "trainer.train()")
    # DataCollatorForLanguageModeling takes pad_to_multiple_of, not padding= nor max_length=
    assert "add pad_to_multiple_of=" in f["fix"]
    assert "padding=" not in f["fix"] and "max_length=" not in f["fix"]
    assert 'train_sampling_strategy="group_by_length"' in f["fix"]
    assert lazyscope_cmd("check", str(runs["mlm"]["dir"])).returncode == 1


def test_a_seq2seq_collator_is_one_story_at_the_line_that_built_it(runs) -> None:
    report = runs["seq2seq"]["report"]
    (f,) = _recompiles(report)
    program = "hf_seq2seq_trainer.py"
    assert (Path(f["file"]).name, f["line"]) == (
        program, _line(program, "data_collator = DataCollatorForSeq2Seq("))
    assert "input_ids and labels" in f["detail"]
    train = f["compiled_at"]["line"]
    for note in report["notes"]:  # nothing at the finding's line or site says "nothing to do"
        if note["kind"] in ("reuse", "recompile"):
            assert note["line"] not in (f["line"], train), note
            assert (note.get("compiled_at") or {}).get("line") != train, note
    # DataCollatorForSeq2Seq takes both padding options
    assert "add pad_to_multiple_of=" in f["fix"] and 'padding="max_length"' in f["fix"]


def test_an_accelerate_loop_is_advised_for_its_training_loader(runs) -> None:
    run_dir, report = runs["accelerate"]["dir"], runs["accelerate"]["report"]
    program = "hf_accelerate_glue.py"
    (f,) = _recompiles(report)
    assert (Path(f["file"]).name, f["line"]) == (
        program, _line(program, "data_collator = DataCollatorWithPadding("))
    assert "TrainingArguments" not in f["fix"] and "LengthGroupedBatchSampler" in f["fix"]
    advice = lazyscope_cmd("advise", str(run_dir), "--format", "json")
    assert advice.returncode == 0, advice.stderr
    data = json.loads(advice.stdout)
    assert data["lengths"]["batch"] == 8  # the training loader's, not the evaluation's 16
    assert data["collator"]["variable"] == "data_collator" and not data["collator"]["trainer"]


def test_generate_with_a_growing_cache_is_a_finding_at_the_generate_call(runs) -> None:
    program = "hf_generate_eval.py"
    report = runs["generate"]["report"]
    dynamic = _line(program, "out = model.generate(**batch, max_new_tokens=args.new_tokens, "
                             "do_sample=False)")
    (f,) = [f for f in _recompiles(report) if f["line"] == dynamic]
    assert 'cache_implementation="static"' in f["fix"] and "max_new_tokens" in f["fix"]
    assert "in 3 calls" in f["detail"]
    # its stopping criterion's fallback, in a step the watch window did not look at, is at
    # the same line: the user's call into transformers
    (isin,) = [g for g in report["findings"] if g["kind"] == "fallback"]
    assert (Path(isin["file"]).name, isin["line"]) == (program, dynamic)
    assert "aten::isin" in isin["detail"] and "inside transformers" in isin["fix"]
    static = runs["static"]["report"]
    assert not [g for g in _recompiles(static) if "generate()" in g["detail"]]
    assert static["compiles"] < report["compiles"]


def _emitted(run_dir: Path, *options: str) -> str:
    proc = lazyscope_cmd("advise", str(run_dir), "--emit", *options)
    assert proc.returncode == 0, proc.stderr
    assert "PadToBuckets" not in proc.stdout and "PackRows" not in proc.stdout, proc.stdout
    found = re.search(r"^data_collator = (Bucketed\(data_collator, \[[\d, ]+\]\))$",
                      proc.stdout, re.M)
    assert found, proc.stdout
    return found.group(1)


def test_the_emitted_advice_keeps_the_batches_and_cuts_the_compilations(runs,
                                                                        tmp_path: Path) -> None:
    """advise --emit on the MLM Trainer and the accelerate loop, pasted into the programs
    (``--data-collator`` / ``--collate``): they train (the accelerate loop still calls
    ``batch.to(device)``: the BatchEncoding is kept), compile fewer graphs and pass check; on
    the MLM program's own data, the wrapped collator's batches are its own apart from padding
    (the masking kept: labels are not the ids)."""
    mlm = _emitted(runs["mlm"]["dir"], "--horizon", "100")
    glue = _emitted(runs["accelerate"]["dir"], "--horizon", "100")
    cases = {"mlm": ("hf_mlm_trainer.py", ["--steps", "8", "--data-collator", mlm]),
             "accelerate": ("hf_accelerate_glue.py", ["--steps", "8", "--eval-every", "4",
                                                      "--collate", glue])}

    def trace(item: tuple[str, tuple[str, list[str]]]) -> tuple[str, tuple[Path, str]]:
        name, (program, args) = item
        _, stdout = _traced(tmp_path / name, program, args)
        return name, (tmp_path / name, stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        advised = dict(pool.map(trace, cases.items()))
    for name, (run_dir, stdout) in advised.items():
        assert "TRAINED 8 steps" in stdout, stdout[-2000:]
        after, before = report_json(run_dir), runs[name]["report"]
        assert after["compiles"] < before["compiles"], (name, after["compiles"],
                                                       before["compiles"])
        assert not _recompiles(after), after["findings"]
        check = lazyscope_cmd("check", str(run_dir))
        assert check.returncode == 0, (name, check.stdout)
    _same_batches_on_the_programs_data(mlm)


def _same_batches_on_the_programs_data(expression: str) -> None:
    import torch

    sys.path.insert(0, str(PROGRAMS))
    try:
        import hf_tiny
    finally:
        sys.path.remove(str(PROGRAMS))
    from transformers import DataCollatorForLanguageModeling

    tokenizer = hf_tiny.tokenizer()
    features = [tokenizer(t, truncation=True, max_length=128, return_special_tokens_mask=True)
                for t in hf_tiny.texts(512, 4, 110, seed=1)]
    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15)
    wrapped = hf_tiny.pasted(expression, collator, tokenizer=tokenizer)
    for i in range(0, 64, 8):
        torch.manual_seed(i)
        plain = collator([dict(f) for f in features[i:i + 8]])
        torch.manual_seed(i)
        padded = wrapped([dict(f) for f in features[i:i + 8]])
        assert type(padded) is type(plain) and list(padded) == list(plain)
        n = plain["input_ids"].shape[1]
        assert padded["input_ids"].shape[1] >= n
        for key in plain:
            assert torch.equal(padded[key][:, :n], plain[key]), key
        assert (padded["labels"][:, n:] == -100).all()
        assert (padded["attention_mask"][:, n:] == 0).all()
        assert not torch.equal(plain["labels"], plain["input_ids"])  # masked, not copied
