"""Where a library collator was built (followed through the user's variables, read from real
files), what its installed class takes (transformers' own classes, by inspect.signature), the
maker of a family that varies in several tensors at once (a seq2seq collator), the padding fix
said only in arguments the class takes, and one story per site (no "bucketing that works" note
beside a recompile finding at the same site)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyscope.analyze.findings import Finding, RecompileFacts, ReuseFacts, _one_story
from lazyscope.analyze.makers import ShapeMaker, shape_maker
from lazyscope.model import Frame
from lazyscope.model.builders import built_at

MLM = '''\
import transformers
def main(args):
    tokenizer = make_tokenizer()
    # Data collator
    data_collator = DataCollatorForLanguageModeling(
        tokenizer=tokenizer,
        mlm_probability=args.mlm_probability,
    )
    data_collator = maybe_wrap(data_collator)
    trainer = Trainer(
        model=model,
        data_collator=data_collator,
    )
    trainer.train()
'''


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_collator_in_a_variable_is_named_where_it_was_built(tmp_path: Path) -> None:
    script = _write(tmp_path, "run_mlm.py", MLM)
    # the loader is made inside trainer.train(): the Trainer(...) call hands the collator over
    found = built_at([script], Frame(script, 14, "main"), ["DataCollatorForLanguageModeling"])
    assert found is not None and (found.file, found.line) == (script, 5)
    # a name rebound to something built from it: the line that calls the class, not the last
    # assignment; without the class's name, the latest call
    assert built_at([script], Frame(script, 14), ["Other"]).line == 9


def test_a_loaders_collate_fn_is_followed_from_the_line_that_made_the_loader(
        tmp_path: Path) -> None:
    script = _write(tmp_path, "glue.py", (
        "collate = make_collator(tok)\n"                       # 1
        "data_collator = collate\n"                            # 2
        "train = DataLoader(ds, collate_fn=data_collator)\n"   # 3
        "evaluate = DataLoader(ev, collate_fn=partial(f))\n"   # 4
        "inline = Trainer(data_collator=X(tok) if a else None)\n"))  # 5
    assert built_at([script], Frame(script, 3), ["X"]).line == 1  # name -> name -> call
    assert built_at([script], Frame(script, 4), ["X"]).line == 4  # a call: that line
    assert built_at([script], Frame(script, 5), ["X"]).line == 5  # the branch that builds it
    # from every handover in the files, several answers: no single line
    assert built_at([script], None, ["X"]) is None
    assert built_at([str(tmp_path / "missing.py")], None, ["X"]) is None


def test_a_parameter_or_attribute_is_not_followed(tmp_path: Path) -> None:
    script = _write(tmp_path, "lib.py", (
        "def fit(model, collator):\n"
        "    return Trainer(model=model, data_collator=collator)\n"
        "class Job:\n"
        "    def run(self):\n"
        "        return DataLoader(self.ds, collate_fn=self.collate)\n"))
    assert built_at([script], Frame(script, 2), ["X"]) is None
    assert built_at([script], Frame(script, 5), ["X"]) is None


def test_what_an_installed_collator_class_takes_follows_its_kwargs_to_its_bases() -> None:
    dc = pytest.importorskip("transformers.data.data_collator")
    from lazyscope.backends.loaders import accepts, collate_info

    mlm = accepts(dc.DataCollatorForLanguageModeling)
    assert mlm is not None and "pad_to_multiple_of" in mlm and "padding" not in mlm
    assert "max_length" not in mlm
    padding = accepts(dc.DataCollatorWithPadding)
    assert padding is not None and {"padding", "max_length", "pad_to_multiple_of"} <= set(padding)
    # DataCollatorWithFlattening passes **kwargs to DefaultDataCollator: no padding option
    flat = accepts(dc.DataCollatorWithFlattening)
    assert flat is not None and "return_tensors" in flat and "pad_to_multiple_of" not in flat
    tok = _tokenizer()
    info = collate_info(dc.DataCollatorForLanguageModeling(tok))
    assert info["accepts"] == mlm and info["package"] == "transformers"


def _tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[MASK]": 2, "a": 3}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, "[UNK]")),
                                   pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")


SEQ2SEQ = [{"collate": {"name": "DataCollatorForSeq2Seq", "package": "transformers",
                        "version": "5.24.0", "object": True, "library": True},
            "made_at": [["/work/run_summarization.py", 88, "main", False]], "batches": 32,
            "varying": {"input_ids": {"1": [46, 52, 55, 57, 61]},
                        "attention_mask": {"1": [46, 52, 55, 57, 61]},
                        "labels": {"1": [16, 18, 19, 20]},
                        "decoder_input_ids": {"1": [16, 18, 19, 20]}}}]


def test_a_family_varying_in_inputs_and_labels_is_the_seq2seq_collators() -> None:
    """The graphs take both the inputs and the labels: their sizes are the union of the two
    tensors' (no one tensor took 60% of them)."""
    m = shape_maker([16, 18, 19, 20, 46, 52, 55, 61], SEQ2SEQ)
    assert isinstance(m, ShapeMaker) and m.key == "input_ids and labels" and m.matched == 8
    assert m.sizes == [16, 18, 19, 20, 46, 52, 55, 57, 61]
    assert shape_maker([3, 5, 7], SEQ2SEQ) is None


def _recompile(file: str, line: int, at: Frame) -> Finding:
    facts = RecompileFacts(compiled_at=at, changes=[], varying=[], graphs=9, dynamic=[],
                           classes={}, verdict="churn")
    return Finding("recompile", file, line, "main", [], 8, [1, 2], 2, 50.0, "", "", facts)


def _reuse(file: str, line: int, at: Frame) -> Finding:
    facts = ReuseFacts(compiled_at=at, graphs=8, runs=[2, 4], varying=[])
    return Finding("reuse", file, line, "main", [], 8, [], 0, 0.0, "", "", facts)


def test_no_reuse_note_stands_beside_a_recompile_finding_at_its_site() -> None:
    train = Frame("/w/s2s.py", 88, "<module>")
    evaluate = Frame("/w/s2s.py", 91, "<module>")
    finding = _recompile("/w/s2s.py", 71, train)  # at the collator, compiled at train()
    notes = [_reuse("/w/s2s.py", 88, train), _reuse("/w/s2s.py", 91, evaluate),
             _reuse("/w/s2s.py", 71, Frame("/w/other.py", 3))]
    kept = _one_story([finding], notes)
    assert [(n.file, n.line) for n in kept] == [("/w/s2s.py", 91)]
    assert _one_story([], notes) == notes


def test_the_advice_knows_the_collators_name_and_line_in_the_program(tmp_path: Path) -> None:
    from lazyscope.model.builders import built_name, collator_source

    script = _write(tmp_path, "run_mlm.py", MLM)
    assert built_name(script, 5) == "data_collator" and built_name(script, 10) == "trainer"
    assert built_name(script, 2) == "main" and built_name(script, 11) is None
    hf = {"name": "DataCollatorForLanguageModeling", "object": True, "library": True,
          "package": "transformers", "loader_at": [script, 14]}
    assert collator_source(hf, [script]) == {**hf, "built_at": [script, 5],
                                             "variable": "data_collator"}
    own = {"name": "main", "object": False, "library": False, "file": script, "line": 2}
    assert collator_source(own, [])["variable"] == "main"


def test_a_collator_that_does_more_than_pad_is_never_packed_away() -> None:
    from lazyscope.analyze.makers import more_than_padding

    mlm = {"name": "DataCollatorForLanguageModeling", "package": "transformers"}
    assert "masking" in more_than_padding(mlm)
    assert "decoder_input_ids" in more_than_padding({**mlm, "name": "DataCollatorForSeq2Seq"})
    assert more_than_padding({**mlm, "name": "DataCollatorWithPadding"}) == ""
    assert more_than_padding({"name": "collate", "library": False}) == ""
    assert more_than_padding(None) == ""
