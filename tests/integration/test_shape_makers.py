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

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.slow, pytest.mark.xla]
pytest.importorskip("transformers")
pytest.importorskip("torch_xla")

PROGRAM = REPO / "tests" / "programs" / "hf_classifier.py"


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.read_text().splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def classifier_runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("classifier")
    cases = {"dynamic": ["--steps", "10"],
             "multiple16": ["--steps", "8", "--pad-to-multiple-of", "16"]}

    def trace(name: str) -> tuple[str, Path]:
        out = base / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(PROGRAM),
                             *cases[name], timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "TRAINED" in proc.stdout
        return name, out

    with ThreadPoolExecutor(max_workers=2) as pool:
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
    check = lazyscope_cmd("check", str(classifier_runs["dynamic"]))
    assert check.returncode == 1, check.stdout
    assert f"hf_classifier.py:{_line('data_collator=')}" in check.stdout


def test_padding_to_a_multiple_has_no_recompile_finding_and_passes_check(classifier_runs) -> None:
    report = report_json(classifier_runs["multiple16"])
    assert not [f for f in report["findings"] if f["kind"] == "recompile"], report["findings"]
    # a bucket first met after warm-up is a note, never advice to pad to a multiple again
    for note in report["notes"]:
        assert "pad_to_multiple_of=" not in note["fix"], note
    check = lazyscope_cmd("check", str(classifier_runs["multiple16"]))
    assert check.returncode == 0, check.stdout
