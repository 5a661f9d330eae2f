"""Where batch shapes are made: the DataLoader watch (real torch DataLoaders on the CPU, no
XLA), the match of a family's varying sizes to a loader, and the user's line that builds a
library collator (read from a real file)."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import pytest

from lazyscope.analyze.makers import (
    ShapeMaker,
    group_by_length,
    multiple_for,
    padded_shapes,
    padded_to_multiple,
    shape_maker,
)
from lazyscope.backends.loaders import LoaderWatch, batch_shapes, collate_info
from lazyscope.model.source_files import call_line

torch = pytest.importorskip("torch")
from torch.nn.utils.rnn import pad_sequence  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

LENGTHS = [5, 9, 14, 7, 20, 11, 26, 3]


def pad_longest(items):
    return pad_sequence(items, batch_first=True)


class Wrapper:
    """Stands for transformers' RemoveColumnsCollator: a library wrapper around the collator."""

    def __init__(self, data_collator):
        self.data_collator = data_collator

    def __call__(self, features):
        return self.data_collator(features)


def test_batch_shapes_walks_dicts_lists_and_tuples_and_reads_no_values() -> None:
    batch = {"input_ids": torch.zeros(2, 7, dtype=torch.long), "extra": [torch.ones(3), 4],
             "pair": (torch.ones(2, 2), "text")}
    assert batch_shapes(batch) == {"input_ids": (2, 7), "extra[0]": (3,), "pair[0]": (2, 2)}
    assert batch_shapes((torch.ones(4, 5), torch.ones(4))) == {"[0]": (4, 5), "[1]": (4,)}


def test_collate_info_names_a_function_its_partial_and_a_wrapped_object() -> None:
    info = collate_info(pad_longest)
    assert info["name"] == "pad_longest" and info["file"] == __file__
    assert info["line"] == pad_longest.__code__.co_firstlineno and not info["object"]
    assert collate_info(functools.partial(pad_longest))["name"] == "pad_longest"
    wrapped = collate_info(Wrapper(pad_longest))
    assert wrapped["name"] == "pad_longest"  # the wrapper is seen through


def test_the_watch_records_where_each_loader_was_made_and_its_varying_sizes() -> None:
    import torch.utils.data.dataloader as dl

    before = (dl.DataLoader.__init__, dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__)
    watch = LoaderWatch()
    watch.install()
    try:
        data = [torch.randn(n, 4) for n in LENGTHS]
        loader = DataLoader(data, batch_size=2, collate_fn=pad_longest); made = _line()  # noqa: E702
        fixed = DataLoader(torch.randn(8, 3), batch_size=4)
        for _ in range(2):  # two epochs: one loader, counted once
            for batch in loader:
                assert batch.shape[0] == 2
        for _ in fixed:
            pass
    finally:
        watch.remove()
    assert (dl.DataLoader.__init__, dl.DataLoader.__iter__,
            dl._BaseDataLoaderIter.__next__) == before
    info = watch.info()
    assert len(info) == 2
    mine = next(rec for rec in info if rec["collate"]["name"] == "pad_longest")
    assert mine["batches"] == 8
    assert mine["varying"] == {"batch": {"1": [9, 14, 20, 26]}}
    assert [f[:2] for f in mine["made_at"] if not f[3]][0] == [__file__, made]
    other = next(rec for rec in info if rec is not mine)
    assert other["varying"] == {} and other["collate"]["library"]


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_a_family_is_matched_to_the_loader_whose_batches_took_its_sizes() -> None:
    loaders = [
        {"collate": {"name": "default_collate"}, "made_at": [], "batches": 9,
         "varying": {"[0]": {"0": [2, 4]}}},
        {"collate": {"name": "DataCollatorWithPadding", "package": "transformers",
                     "version": "5.1.0", "object": True, "library": True},
         "made_at": [["/site-packages/transformers/trainer.py", 10, "get", True],
                     ["/work/train.py", 70, "<module>", False]],
         "batches": 40, "varying": {"input_ids": {"1": [67, 72, 80, 88, 104, 115, 119, 120]},
                                    "attention_mask": {"1": [67, 72, 80, 88, 104]}}},
    ]
    m = shape_maker([72, 88, 104, 115, 119, 99], loaders)
    assert isinstance(m, ShapeMaker) and m.key == "input_ids" and m.matched == 5
    assert m.hf_padding and not m.users_function and m.version == "5.1.0"
    assert m.made_by_user.line == 70 and m.frame().line == 70
    assert shape_maker([3, 5, 7], loaders) is None  # sizes no loader took
    assert shape_maker([72], loaders) is None  # one size is no pattern


def test_padding_advice_from_the_sizes_seen() -> None:
    sizes = [67, 72, 80, 88, 104, 115, 119, 120]
    n = multiple_for(sizes)
    assert n == 8 and len(padded_shapes(sizes, n)) <= 8
    assert multiple_for(list(range(3, 500, 7))) >= 64
    assert padded_to_multiple([80, 96, 128]) == 16 and padded_to_multiple([67, 80]) == 0
    assert group_by_length("5.0.1") == 'TrainingArguments(train_sampling_strategy="group_by_length")'
    assert group_by_length("4.57.0") == "TrainingArguments(group_by_length=True)"


def test_call_line_finds_the_users_line_that_builds_the_collator(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "from transformers import DataCollatorWithPadding, Trainer\n"
        "trainer = Trainer(\n"
        "    model=model,\n"
        "    data_collator=DataCollatorWithPadding(tok),\n"
        ")\n")
    assert call_line([str(script)], ["DataCollatorWithPadding"]).line == 4
    other = tmp_path / "other.py"
    other.write_text("trainer = Trainer(model=m,\n    data_collator=make())\n")
    assert call_line([str(other)], ["DataCollatorWithPadding"], "data_collator").line == 2
    assert call_line([str(other)], ["DataCollatorWithPadding"]) is None


def test_the_task_is_read_from_the_loaders_last_batch() -> None:
    from lazyscope.analyze.makers import SEQUENCE_LABELS, TOKEN_LABELS, data_task

    hf = {"name": "DataCollatorWithPadding", "package": "transformers", "version": "5.1",
          "object": True}
    cls = [{"batches": 30, "collate": hf, "shapes": {"input_ids": [8, 77], "labels": [8]}}]
    lm = [{"batches": 30, "collate": {"name": "collate"},
           "shapes": {"input_ids": [8, 77], "labels": [8, 77]}}]
    pairs = [{"batches": 3, "shapes": {"[0]": [8, 50], "[1]": [8]}}]
    task, collator = data_task(cls)
    assert task == SEQUENCE_LABELS and collator == {**hf, "trainer": False, "rows": 8,
                                                     "loader_at": None}
    task, collator = data_task(lm)  # a collate function of the user's is the one advice wraps
    assert task == TOKEN_LABELS and collator is not None and collator["name"] == "collate"
    assert data_task(pairs) == (SEQUENCE_LABELS, None)  # no collate recorded
    assert data_task([]) == ("", None) and data_task(None) == ("", None)
    # a training loader (backward passes between its batches) is read before an evaluation
    # loader that yielded more batches
    evaluation = {"batches": 90, "trained": 0, "collate": hf,
                  "shapes": {"input_ids": [32, 60], "labels": [32]}}
    training = {**lm[0], "trained": 29}
    assert data_task([evaluation, training])[1]["rows"] == 8


def test_no_plan_is_ranked_above_one_that_pads_the_same() -> None:
    """Lengths whose batch maxima all reach the top: one length-grouped bucket is pad to max,
    the same shapes; it is not offered as a plan of its own."""
    from lazyscope import advise

    rng = random.Random(0)
    values = [rng.randint(100, 120) for _ in range(4000)]
    advice = advise(values, batch=32, max_len=120, horizon=32)
    names = [p.name for p in advice.plans]
    assert "1 bucket, length-grouped" not in names, names


def test_the_watch_keeps_no_loader_alive_and_keeps_its_record() -> None:
    """A loader the program drops is collected (its workers would be kept otherwise); what it
    yielded stays in the record, apart from a later loader that gets its id."""
    import gc
    import weakref

    watch = LoaderWatch()
    watch.install()
    try:
        loader = DataLoader([torch.randn(n, 4) for n in LENGTHS], batch_size=2,
                            collate_fn=pad_longest)
        for _ in loader:
            pass
        ref = weakref.ref(loader)
        del loader
        gc.collect()
        assert ref() is None
        again = DataLoader([torch.randn(3, 4)] * 4, batch_size=2)
        for _ in again:
            pass
    finally:
        watch.remove()
    names = sorted(rec["collate"]["name"] for rec in watch.info())
    assert names == ["default_collate", "pad_longest"]


def test_batch_tokens_counts_what_the_batch_says_is_padding() -> None:
    from lazyscope.backends.loaders import batch_tokens
    from lazyscope.data import PackRows, PadToBuckets

    rng = random.Random(3)
    for _ in range(50):
        lengths = [rng.randint(1, 40) for _ in range(rng.randint(1, 6))]
        items = [{"input_ids": torch.randint(1, 50, (n,))} for n in lengths]
        padded = PadToBuckets([16, 48], rows=len(items))(items)
        real, total, how = batch_tokens(padded)
        assert (real, how) == (sum(lengths), "attention_mask")
        assert total == padded["input_ids"].numel()
        # (tokens, label) pairs padded by pad_sequence (0): the nonzero ids
        pairs = (pad_sequence([it["input_ids"] for it in items], batch_first=True),
                 torch.zeros(len(items)))
        assert batch_tokens(pairs)[:2] == (sum(lengths), pairs[0].numel())
        # packed rows: document_ids -1 on padding
        packed = PackRows(4, 64, return_document_ids=True)(items)
        assert batch_tokens(packed)[:2] == (sum(lengths), 4 * 64)
        no_docs = PackRows(4, 64)(items)  # labels: -100 on padding and each document's start
        assert batch_tokens(no_docs)[:2] == (sum(lengths) - len(lengths), 4 * 64)
    # what says nothing of its padding is not counted
    assert batch_tokens({"input_ids": torch.ones(2, 5, dtype=torch.long)}) is None
    assert batch_tokens((torch.randn(2, 5), torch.ones(2))) is None
    assert batch_tokens(torch.ones(2, 5)) is None
    meta = {"attention_mask": torch.ones(2, 5, device="meta")}  # not on the CPU: not read
    assert batch_tokens(meta) is None


def test_the_watch_counts_each_batchs_real_tokens() -> None:
    watch = LoaderWatch()
    watch.install()
    try:
        data = [torch.randint(1, 9, (n,)) for n in LENGTHS]
        for _ in DataLoader(data, batch_size=2, collate_fn=pad_longest):
            pass
    finally:
        watch.remove()
    (rec,) = watch.info()
    tokens = rec["tokens"]
    assert tokens["real_per_batch"] == [LENGTHS[i] + LENGTHS[i + 1] for i in range(0, 8, 2)]
    assert tokens["padded_per_batch"] == [2 * max(LENGTHS[i:i + 2]) for i in range(0, 8, 2)]
    assert tokens["real"] == sum(LENGTHS) and tokens["counted_by"] == "nonzero token ids"
