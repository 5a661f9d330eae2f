"""lazyscope.data's collators and samplers against brute force (hypothesis), in a real
DataLoader (worker processes included), and beside Hugging Face's own collators.

CPU only, no torch_xla: a few seconds."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from lazyscope.core.padding import Packer, Policy, pack_rows  # noqa: E402
from lazyscope.data import (  # noqa: E402
    IGNORE_INDEX,
    LengthGroupedBatchSampler,
    PackedBatchSampler,
    PackRows,
    PadToBuckets,
    collate_for,
    document_causal_mask,
    layout_rows,
    lengths_of,
    multihead_attention_mask,
    sampler_for,
)
from tests.conftest import REPO  # noqa: E402

lengths_st = st.lists(st.integers(1, 24), min_size=1, max_size=12)


def _docs(lengths: list[int], seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 50, (n,), generator=g) for n in lengths]


def brute_bfd(lengths: list[int], rows: int, row_len: int) -> tuple[list[list[int]], list[int]]:
    """Best fit decreasing written the slow, obvious way."""
    free = [row_len] * rows
    placed: list[list[int]] = [[] for _ in range(rows)]
    left = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = [(free[r], r) for r in range(rows) if free[r] >= lengths[i]]
        if not fits:
            left.append(i)
            continue
        _, r = min(fits)
        placed[r].append(i)
        free[r] -= lengths[i]
    return placed, sorted(left)


@settings(max_examples=150, deadline=None)
@given(lengths=lengths_st, rows=st.integers(1, 4), row_len=st.integers(1, 40))
def test_pack_rows_is_best_fit_decreasing(lengths, rows, row_len) -> None:
    placed, left = pack_rows(lengths, rows, row_len)
    assert (placed, left) == brute_bfd(lengths, rows, row_len)
    items = sorted([i for row in placed for i in row] + left)
    assert items == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= row_len for row in placed)
    # an item is left only when no row could take it: the rows' free space at the end is
    # smaller than every left item
    free = [row_len - sum(lengths[i] for i in row) for row in placed]
    assert all(lengths[i] > max(free) for i in left)
    # the rule the sampler and the collate share: packing only the placed items places them
    # the same way
    kept = sorted(i for row in placed for i in row)
    again, none = pack_rows([lengths[i] for i in kept], rows, row_len)
    assert none == [] and [[kept[j] for j in row] for row in again] == placed


@settings(max_examples=120, deadline=None)
@given(lengths=lengths_st, buckets=st.lists(st.integers(1, 30), min_size=1, max_size=4),
       extra_rows=st.integers(0, 2), labelled=st.booleans())
def test_pad_to_buckets_equals_brute_force(lengths, buckets, extra_rows, labelled) -> None:
    docs = _docs(lengths)
    feats = [{"input_ids": d, "labels": d + 100} if labelled else {"input_ids": d.tolist()}
             for d in docs]
    rows = len(docs) + extra_rows
    collate = PadToBuckets(buckets, rows=rows, pad_id=0, truncate=True)
    out = collate(feats)
    longest = max(lengths)
    fits = [b for b in sorted(set(buckets)) if b >= longest]
    expect_len = fits[0] if fits else max(buckets)
    assert out["input_ids"].shape == (rows, expect_len)
    assert set(out) == {"input_ids", "attention_mask", "labels"}
    for r in range(rows):
        for t in range(expect_len):
            real = r < len(docs) and t < lengths[r]
            ids = int(docs[r][t]) if real else 0
            assert int(out["input_ids"][r, t]) == ids
            assert int(out["attention_mask"][r, t]) == int(real)
            label = (ids + 100 if labelled else ids) if real else IGNORE_INDEX
            assert int(out["labels"][r, t]) == label
    if longest > max(buckets):
        with pytest.raises(ValueError, match="longer than the largest bucket"):
            PadToBuckets(buckets, strict=True)(feats)
        # by default a longer batch gets a shape of its own, a multiple of 8, and a warning
        with pytest.warns(UserWarning, match=f"length {longest} is longer than the largest"):
            over = PadToBuckets(buckets, rows=rows)(feats)
        assert over["input_ids"].shape == (rows, -(-longest // 8) * 8)
        assert int(over["attention_mask"].sum()) == sum(lengths)


@settings(max_examples=120, deadline=None)
@given(lengths=lengths_st, rows=st.integers(1, 4), row_len=st.integers(24, 60))
def test_pack_rows_lays_out_every_document_once(lengths, rows, row_len) -> None:
    placed, left = pack_rows(lengths, rows, row_len)
    docs = _docs(lengths)
    collate = PackRows(rows, row_len, return_document_ids=True, return_attention_mask=True)
    if left:
        with pytest.raises(ValueError, match="do not fit"):
            collate(docs)
        docs = [docs[i] for row in placed for i in row]
        lengths = [d.numel() for d in docs]
    out = collate(docs)
    assert all(v.shape == (rows, row_len) for k, v in out.items() if k != "attention_mask")
    found = []
    for r in range(rows):
        ids, lab = out["input_ids"][r], out["labels"][r]
        pos, doc = out["position_ids"][r], out["document_ids"][r]
        t = 0
        d = 0
        while t < row_len and int(doc[t]) >= 0:
            n = 0
            while t + n < row_len and int(doc[t + n]) == d:
                n += 1
            found.append(ids[t:t + n].tolist())
            assert pos[t:t + n].tolist() == list(range(n))  # restarts per document
            assert int(lab[t]) == IGNORE_INDEX  # no document predicts from another
            assert lab[t + 1:t + n].tolist() == ids[t + 1:t + n].tolist()
            t += n
            d += 1
        # the padding at the row's end: its own positions from 0, labels ignored
        assert (doc[t:] == -1).all() and (lab[t:] == IGNORE_INDEX).all()
        assert pos[t:].tolist() == list(range(row_len - t))
    assert sorted(found) == sorted(d.tolist() for d in docs)
    # the SDPA mask: brute force, cell by cell
    mask = out["attention_mask"]
    assert mask.shape == (rows, 1, row_len, row_len) and mask.dtype == torch.bool
    doc = out["document_ids"]
    for r in range(rows):
        for i in range(0, row_len, 5):
            for j in range(0, row_len, 3):
                assert bool(mask[r, 0, i, j]) == (int(doc[r, i]) == int(doc[r, j]) and j <= i)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 32), min_size=1, max_size=80), rows=st.integers(1, 4),
       seed=st.integers(0, 3), shuffle=st.booleans())
def test_packed_sampler_covers_the_data_once_and_always_fits(lengths, rows, seed,
                                                             shuffle) -> None:
    sampler = PackedBatchSampler(lengths, rows, 32, seed=seed, shuffle=shuffle)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        placed, left = pack_rows([lengths[i] for i in b], rows, 32)
        assert not left  # PackRows takes every batch the sampler makes
    # the sampler's batches are exactly the Packer's rows over the same order
    order = sampler.order()
    packer = Packer((lengths[i] for i in order), rows, 32)
    for b in batches:
        rows_ = packer.next_rows()
        assert sorted(order[s] for row in rows_ for s, _ in row) == sorted(b)
    sampler.set_epoch(1)
    again = list(sampler)
    assert sorted(i for b in again for i in b) == list(range(len(lengths)))


def test_length_grouped_sampler_groups_and_covers() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(1, 200) for _ in range(16 * 8 * 3 + 5)]
    sampler = LengthGroupedBatchSampler(lengths, 8, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == len(lengths) // 8 + 1
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) == 8 for b in batches[:-1]) and len(batches[-1]) == 5
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches[:-1])
    random_spread = sum(max(lengths[i:i + 8]) - min(lengths[i:i + 8])
                        for i in range(0, len(lengths) - 7, 8))
    assert spread < random_spread / 4  # similar lengths share a batch
    dropped = LengthGroupedBatchSampler(lengths, 8, drop_last=True)
    assert len(dropped) == len(list(dropped)) == len(lengths) // 8


def test_policies_build_their_collators_and_samplers() -> None:
    packed = Policy("packed", (64,), rows=4, row_len=64)
    assert isinstance(collate_for(packed), PackRows)
    assert isinstance(sampler_for(packed, [3, 5], 4), PackedBatchSampler)
    grouped = Policy("buckets", (16, 64), grouped=True)
    assert collate_for(grouped, rows=4).buckets == [16, 64]
    assert isinstance(sampler_for(grouped, [3, 5], 4), LengthGroupedBatchSampler)
    assert sampler_for(Policy("max", (64,)), [3], 4) is None
    assert collate_for(Policy("longest")).buckets is None
    with pytest.raises(ValueError, match="longer than a row"):
        PackedBatchSampler([5, 80], 2, 64)
    with pytest.raises(ValueError, match="input_ids"):
        PadToBuckets([8])([{"ids": [1]}])
    assert lengths_of([{"input_ids": [1, 2]}, torch.ones(3), [4]]) == [2, 3, 1]
    out = layout_rows([[[1, 2], [3]], [[4, 5, 6]]], 4)
    assert out["position_ids"].tolist() == [[0, 1, 0, 0], [0, 1, 2, 0]]
    assert out["document_ids"].tolist() == [[0, 0, 1, -1], [0, 0, 0, -1]]
    wrapped = PackRows(1, 10, max_position=4)([[1, 2]])
    assert wrapped["position_ids"].tolist() == [[0, 1, 0, 1, 2, 3, 0, 1, 2, 3]]


class _Docs(torch.utils.data.Dataset):
    """A map-style dataset of token sequences of seeded lengths (picklable for workers)."""

    def __init__(self, n: int, max_len: int):
        rng = random.Random(11)
        self.lengths = [rng.randint(1, max_len) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": torch.full((self.lengths[i],), i % 97 + 1)}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_real_dataloader_gets_few_fixed_shapes(workers) -> None:
    ds = _Docs(300, 48)
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=PackedBatchSampler(ds.lengths, 4, 48, seed=3),
        collate_fn=PackRows(4, 48, return_document_ids=True), num_workers=workers)
    shapes, tokens, docs = set(), 0, 0
    for batch in loader:
        shapes.add(tuple(batch["input_ids"].shape))
        tokens += int((batch["document_ids"] >= 0).sum())
        docs += int((batch["position_ids"] == 0).logical_and(batch["document_ids"] >= 0).sum())
    assert shapes == {(4, 48)} and tokens == sum(ds.lengths) and docs == len(ds)
    assert tokens / (len(loader) * 4 * 48) > 0.9
    grouped = torch.utils.data.DataLoader(
        ds, batch_sampler=LengthGroupedBatchSampler(ds.lengths, 8, drop_last=True),
        collate_fn=PadToBuckets([16, 32, 48], rows=8), num_workers=workers)
    seen = {tuple(b["input_ids"].shape) for b in grouped}
    assert seen <= {(8, 16), (8, 32), (8, 48)} and len(seen) >= 2


def test_beside_hugging_face_collators() -> None:
    """PadToBuckets with multiples of 8 pads as DataCollatorWithPadding(pad_to_multiple_of=8)
    does; PackRows' rows hold what DataCollatorWithFlattening puts in its one row (ids, labels
    with -100 at each document's start, restarting position_ids), at a fixed shape."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models

    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "a": 1}, unk_token="[PAD]")),
        pad_token="[PAD]")
    docs = _docs([5, 17, 9])
    feats = [{"input_ids": d.tolist()} for d in docs]
    hf = transformers.DataCollatorWithPadding(tok, pad_to_multiple_of=8, return_tensors="pt")(
        [dict(f) for f in feats])
    ours = PadToBuckets(list(range(8, 65, 8)))(feats)
    assert torch.equal(hf["input_ids"], ours["input_ids"])
    assert torch.equal(hf["attention_mask"], ours["attention_mask"])
    flat = transformers.DataCollatorWithFlattening(return_tensors="pt")(
        [dict(f) for f in feats])
    packed = PackRows(1, 32, return_document_ids=True)(feats)
    real = packed["document_ids"][0] >= 0
    # the same documents in the same order (PackRows places longest first)
    order = sorted(range(3), key=lambda i: -docs[i].numel())
    again = transformers.DataCollatorWithFlattening(return_tensors="pt")(
        [feats[i] for i in order])
    for key in ("input_ids", "labels", "position_ids"):
        assert torch.equal(packed[key][0][real], again[key][0]), key
    assert flat["input_ids"].shape == (1, 31) and packed["input_ids"].shape == (1, 32)


def test_import_lazyscope_does_not_import_data_or_torch() -> None:
    code = "import sys, lazyscope; print('lazyscope.data' in sys.modules, 'torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_document_mask_keeps_documents_apart_in_sdpa() -> None:
    """Attention over a packed row with the mask equals attention over each document alone."""
    rows = PackRows(1, 16, return_document_ids=True)([[1] * 5, [2] * 7])
    mask = document_causal_mask(rows["document_ids"])
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    doc = rows["document_ids"][0]
    for d in (0, 1):
        idx = (doc == d).nonzero().flatten()
        alone = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, idx], k[:, :, idx], v[:, :, idx], is_causal=True)
        assert torch.allclose(out[:, :, idx], alone, atol=1e-6)


def test_the_multihead_attention_mask_is_the_same_rule_in_its_convention() -> None:
    """nn.MultiheadAttention takes True as 'may not attend' (SDPA: 'may attend'): with
    multihead_attention_mask it computes what SDPA computes with document_causal_mask, and with
    the SDPA mask as it is it would attend across documents."""
    rows = PackRows(2, 12, return_document_ids=True)([[1] * 5, [2] * 7, [3] * 4, [4] * 6])
    ids = rows["document_ids"]
    heads, dim = 2, 8
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(dim, heads, batch_first=True, bias=False)
    x = torch.randn(2, 12, dim)
    out, _ = mha(x, x, x, attn_mask=multihead_attention_mask(ids, heads), need_weights=False)
    # the same projections through SDPA with the SDPA mask
    wq, wk, wv = mha.in_proj_weight.chunk(3)
    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(2, 12, heads, dim // heads).transpose(1, 2)
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        split(x @ wq.T), split(x @ wk.T), split(x @ wv.T), attn_mask=document_causal_mask(ids))
    expected = mha.out_proj(sdpa.transpose(1, 2).reshape(2, 12, dim))
    assert torch.allclose(out, expected, atol=1e-5)
    wrong, _ = mha(x, x, x, attn_mask=document_causal_mask(ids)[:, 0].repeat_interleave(
        heads, dim=0), need_weights=False)
    assert not torch.allclose(wrong, expected, atol=1e-3)


item_kinds = st.sampled_from(["tuple", "dict", "dict-label", "tensor", "list"])


def _item(kind: str, ids: list[int], label: int):
    if kind == "tuple":
        return (torch.tensor(ids), label)
    if kind == "dict":
        return {"input_ids": ids, "labels": label}
    if kind == "dict-label":
        return {"input_ids": torch.tensor(ids), "label": label}  # a datasets column name
    return torch.tensor(ids) if kind == "tensor" else list(ids)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_st, kind=item_kinds, seed=st.integers(0, 99))
def test_lengths_of_reads_the_tokens_of_every_kind_of_item(lengths, kind, seed) -> None:
    """(tokens, label) pairs, dicts, tensors and lists: the length is the tokens' (a pair's is
    not 2)."""
    rng = random.Random(seed)
    items = [_item(kind, [rng.randint(1, 50) for _ in range(n)], rng.randint(0, 3))
             for n in lengths]
    assert lengths_of(items) == lengths


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_st, kind=st.sampled_from(["tuple", "dict", "dict-label"]),
       buckets=st.lists(st.integers(1, 30), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_pad_to_buckets_keeps_one_label_a_sequence(lengths, kind, buckets, seed) -> None:
    """A classification batch: ids padded to the bucket, one label a row (never padded to the
    length, never refused), the same structure out as in (a tuple for tuples: `for x, y in
    loader` unpacks it)."""
    rng = random.Random(seed)
    labels = [rng.randint(0, 3) for _ in lengths]
    feats = [_item(kind, [rng.randint(1, 50) for _ in range(n)], y)
             for n, y in zip(lengths, labels, strict=True)]
    collate = PadToBuckets(buckets, truncate=True)
    out = collate(feats)
    ids, got = (out if kind == "tuple" else (out["input_ids"], out["labels"]))
    want = min((b for b in sorted(set(buckets)) if b >= max(lengths)), default=max(buckets))
    assert ids.shape == (len(lengths), want)
    assert got.tolist() == labels and got.dtype == torch.long
    for row, n in zip(ids.tolist(), lengths, strict=True):
        assert all(t != 0 for t in row[:min(n, want)]) and all(t == 0 for t in row[n:])


def test_a_classification_loop_takes_pad_to_buckets_as_its_collate_fn_unchanged() -> None:
    """The advice pasted into a (tokens, label) loop: `for x, y in loader` runs as before, with
    a few shapes."""
    rng = random.Random(0)
    data = [(torch.randint(1, 50, (rng.randint(3, 60),)), rng.randint(0, 1)) for _ in range(64)]
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True,
                                         collate_fn=PadToBuckets([16, 32, 48, 64], rows=8))
    shapes = set()
    for x, y in loader:
        assert y.shape == (8,)
        shapes.add(tuple(x.shape))
    assert shapes <= {(8, 16), (8, 32), (8, 48), (8, 64)}


def test_packing_refuses_one_label_a_sequence() -> None:
    with pytest.raises(ValueError, match="label for every token"):
        PackRows(1, 16)([{"input_ids": [1, 2, 3], "labels": 1}])


def test_an_over_long_batchs_length_is_declared_as_a_bucket(monkeypatch) -> None:
    """The length an over-long batch is padded to is one the collator pads to from then on: the
    trace is told, as of the buckets, so a graph for it is a bucket met late, not a
    recompilation."""
    import lazyscope.data as data

    declared: list[list[int]] = []
    monkeypatch.setattr(data, "_declare", lambda b: declared.append(list(b)))
    collate = PadToBuckets([16, 119], rows=2)
    assert declared == [[16, 119]]
    feats = [{"input_ids": torch.ones(120, dtype=torch.long)}, {"input_ids": torch.ones(5)}]
    with pytest.warns(UserWarning, match="padded to 120"):
        assert collate(feats)["input_ids"].shape == (2, 120)
    collate(feats)  # the same length again: declared and warned once
    assert declared == [[16, 119], [120]]
