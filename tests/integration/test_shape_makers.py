"""The line that makes the shape, on a real Hugging Face Trainer on XLA:CPU.

``tests/programs/hf_classifier.py`` fine-tunes a tiny BERT classifier from a config with
``DataCollatorWithPadding(tokenizer)`` (transformers' default dynamic padding): a new sequence
length, so a new XLA graph, for almost every batch. The recompile finding must name the
``data_collator=DataCollatorWithPadding(...)`` line (not ``trainer.train()``, where the graphs
are cut), give the one-line fix Hugging Face documents for TPUs (``pad_to_multiple_of``, or
``padding="max_length"``) and the length-grouped sampler as the installed transformers spells
it, and ``lazyscope check`` must fail. The same program with ``--pad-to-multiple-of 16`` has a
few shapes, each compiled once: no recompile finding, and ``check`` passes.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.slow, pytest.mark.xla]
pytest.importorskip("transformers")
pytest.importorskip("torch_xla")

PROGRAM = REPO / "tests" / "programs" / "hf_classifier.py"
CLASSIFIER = REPO / "tests" / "programs" / "text_classifier.py"
CAUSAL_LM = REPO / "tests" / "programs" / "causal_lm.py"


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.read_text().splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def classifier_runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("classifier")
    cases = {"dynamic": ["--steps", "10"],
             "multiple16": ["--steps", "8", "--pad-to-multiple-of", "16"],
             "broken": ["--steps", "8", "--broken-collator"]}

    def trace(name: str) -> tuple[str, Path]:
        out = base / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(PROGRAM),
                             *cases[name], timeout=900)
        # the broken collator raises in torch_xla's loader thread: the program ends well
        # ("TRAINED 0 steps"), the run is failed (exit 5)
        assert proc.returncode == (5 if name == "broken" else 0), \
            proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "TRAINED" in proc.stdout
        (out / "stderr.txt").write_text(proc.stderr)
        return name, out

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(trace, cases))


def test_dynamic_padding_is_named_at_the_data_collator_line_with_the_fix(classifier_runs) -> None:
    report = report_json(classifier_runs["dynamic"])
    recompiles = [f for f in report["findings"] if f["kind"] == "recompile"]
    assert len(recompiles) == 1, report["findings"]
    f = recompiles[0]
    assert (f["file"], f["line"]) == (str(PROGRAM), _line("data_collator=DataCollatorWithPadding"))
    # where the graphs were cut and the loader made (trainer.train()) is the call path
    assert f["compiled_at"]["line"] == _line("trainer.train()")
    assert "pad_to_multiple_of=" in f["fix"] and 'padding="max_length"' in f["fix"]
    assert 'train_sampling_strategy="group_by_length"' in f["fix"]
    assert "DataCollatorWithPadding" in f["detail"] and "more graph" in f["detail"]
    # the loader works ahead of the steps: the sizes it made and no graph has yet are coming
    assert int(f["detail"].split("expect ~")[1].split()[0]) >= 5
    check = lazyscope_cmd("check", str(classifier_runs["dynamic"]))
    assert check.returncode == 1, check.stdout
    assert f"hf_classifier.py:{_line('data_collator=')}" in check.stdout


def test_padding_to_a_multiple_has_no_recompile_finding_and_passes_check(classifier_runs) -> None:
    report = report_json(classifier_runs["multiple16"])
    assert not [f for f in report["findings"] if f["kind"] == "recompile"], report["findings"]
    # a bucket first met after warm-up is a note, never advice to pad to a multiple again
    for note in report["notes"]:
        assert "pad_to_multiple_of=" not in note["fix"], note
        assert "a few fixed bucket sizes" not in note["fix"], note
    check = lazyscope_cmd("check", str(classifier_runs["multiple16"]))
    assert check.returncode == 0, check.stdout


def test_a_trainer_whose_loader_thread_died_is_a_failed_run_not_an_ok_one(classifier_runs) -> None:
    """The collator raises inside torch_xla's loader thread: the Trainer stops at step 0 and
    its loop still reaches barriers, each running nothing. The run is failed at the line that
    raised, the gate fails, and a diff against a real run gives no speed-up."""
    run = classifier_runs["broken"]
    report = report_json(run)
    assert report["status"] == "failed"
    assert "KeyError: 'label_ids'" in report["error"] and "_loader_worker" in report["error"]
    assert f"hf_classifier.py:{_line('raise KeyError')}" in report["error"]
    assert report["idle"].endswith("on the device in all") and "steps ran" in report["idle"]
    said = [ln for ln in (run / "stderr.txt").read_text().splitlines()
            if ln.startswith("lazyscope: ") and "failed" in ln]
    assert len(said) == 1 and "an exception ended the program's thread" in said[0]
    check = lazyscope_cmd("check", str(run))
    assert check.returncode == 1 and "run-status" in check.stdout
    diff = lazyscope_cmd("diff", str(classifier_runs["dynamic"]), str(run), "--format", "json")
    assert diff.returncode == 0, diff.stderr
    data = json.loads(diff.stdout)
    wall = next(m for m in data["metrics"] if m["name"] == "wall_seconds")
    assert wall["ratio"] is None
    assert any("not comparable" in w for w in data["warnings"])


def test_an_unseeded_classifier_gets_the_same_verdict_on_every_run(tmp_path: Path) -> None:
    """A (tokens, label) classifier whose loader shuffles unseeded and whose collate_fn pads
    with pad_sequence: two runs see two orders of the data, and both are a recompile finding at
    the collate function's def line, with a padding fix there, and fail check."""
    def trace(name: str) -> dict:
        out = tmp_path / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(CLASSIFIER),
                             timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        check = lazyscope_cmd("check", str(out))
        assert check.returncode == 1, check.stdout
        return report_json(out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(trace, ["a", "b"]))
    def_line = next(i for i, ln in enumerate(CLASSIFIER.read_text().splitlines(), 1)
                    if ln.startswith("def collate"))
    for report in reports:
        (f,) = [f for f in report["findings"] if f["kind"] == "recompile"]
        assert (f["file"], f["line"]) == (str(CLASSIFIER), def_line)
        assert "pad to a few fixed lengths in collate" in f["fix"]
        assert report["verdict"].startswith("recompiles in steady state")


def _emitted(text: str, pattern: str) -> str:
    import re

    found = re.search(pattern, text)
    assert found, text
    return found.group(1)


def test_the_emitted_advice_runs_as_pasted_and_passes_check(classifier_runs,
                                                            tmp_path: Path) -> None:
    """advise -> emit -> paste -> trace -> check -> diff, on the Trainer classifier (the
    advisor's Bucketed around its data_collator, and the smallest change,
    pad_to_multiple_of=N), on the (tokens, label) classifier and on the causal LM in an
    accelerate loop (the whole emitted block pasted as the loader, as it is: Bucketed around
    its collate for the one, packed rows for the other, before ``accelerator.prepare``). Whether the gain is the predicted one is timed in
    benchmarks/advice_gain.py, not here."""
    emit = lazyscope_cmd("advise", str(classifier_runs["dynamic"]), "--emit")
    assert emit.returncode == 0, emit.stderr
    assert "PackRows" not in emit.stdout  # one label a sequence: never packed
    multiple = _emitted(emit.stdout, r"add pad_to_multiple_of=(\d+) to the "
                                     r"DataCollatorWithPadding\(\.\.\.\)")
    buckets = _emitted(emit.stdout, r"data_collator\s*=\s*(Bucketed\(data_collator, \[[^\]]*\]\))")
    # the plan ranked first leads (the program's collator wrapped, never replaced), before
    # the collator's smallest change
    assert "PadToBuckets" not in emit.stdout
    assert emit.stdout.index("Bucketed(") < emit.stdout.index("pad_to_multiple_of=")
    # the causal LM as an accelerate loop: Accelerator().prepare(model, opt, loader)
    plain = {"loop": (CLASSIFIER, ["--steps", "16"]),
             "lm": (CAUSAL_LM, ["--steps", "12", "--accelerate"])}

    def trace(name: str, program: Path, args: list[str]) -> tuple[str, Path]:
        out = tmp_path / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(program), *args,
                             timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return name, out

    with ThreadPoolExecutor(max_workers=2) as pool:
        bases = {name[:-len("-as-written")]: out for name, out in pool.map(
            lambda kv: trace(f"{kv[0]}-as-written", *kv[1]), plain.items())}
    loaders = {}
    for name, options in (("loop", ["--no-model-changes"]), ("lm", [])):
        emitted = lazyscope_cmd("advise", str(bases[name]), "--emit", *options)
        assert emitted.returncode == 0, emitted.stderr
        loaders[name] = tmp_path / f"{name}_loader.py"
        loaders[name].write_text(emitted.stdout)
    assert "PackRows" not in loaders["loop"].read_text()
    # a label a token: packing is a candidate; on this run packed rows and length-grouped
    # buckets are priced within 1% of each other (4,042 and 4,073 real tokens/s over the
    # default horizon), so either may lead: the emitted plan is one that changes the sampler
    assert "PackRows(" in loaders["lm"].read_text() or \
        "LengthGroupedBatchSampler(" in loaders["lm"].read_text()
    cases = {"multiple": (PROGRAM, ["--steps", "8", "--pad-to-multiple-of", multiple]),
             "buckets": (PROGRAM, ["--steps", "8", "--data-collator", buckets]),
             "loop": (CLASSIFIER, ["--steps", "16", "--loader", str(loaders["loop"])]),
             "lm": (CAUSAL_LM, ["--steps", "8", "--accelerate", "--loader",
                               str(loaders["lm"])])}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(pool.map(lambda kv: trace(*kv), ((k, *v) for k, v in cases.items())))
    for name, run in runs.items():
        check = lazyscope_cmd("check", str(run))
        assert check.returncode == 0, (name, check.stdout)
    for name in ("loop", "lm"):
        assert lazyscope_cmd("check", str(bases[name])).returncode == 1, name
        diff = lazyscope_cmd("diff", str(bases[name]), str(runs[name]), "--format", "json")
        metrics = {m["name"]: m for m in json.loads(diff.stdout)["metrics"]}
        assert metrics["compiles"]["b"] < metrics["compiles"]["a"], (name, metrics)
        # the real tokens are counted from the batches in both runs
        assert metrics["real_tokens_per_second"]["ratio"] is not None, (name, metrics)
    lm = {m["name"]: m for m in json.loads(lazyscope_cmd(
        "diff", str(bases["lm"]), str(runs["lm"]), "--format", "json").stdout)["metrics"]}
    # packed rows leave next to no padding; length-grouped buckets pad within a bucket
    # (0.82 on one run, from 0.6 as written): each must do what it is for
    before, after = lm["padding_efficiency"]["a"], lm["padding_efficiency"]["b"]
    if "PackRows(" in loaders["lm"].read_text():
        assert after > 0.9 > before, lm
    else:
        assert after > before + 0.1 and before < 0.9, lm
