"""Every attention variant of the decoder scenario computes the same causal decoder.

One packed batch (2 rows of 32 tokens holding 5 documents of different lengths, padding at the
end of each row) and one padded batch (one document per row) go through the same weights (dim
32, 2 heads, 1 layer, vocab 64, fp32, eval, no_grad) with each variant available on this
machine; the logits of the real tokens must match the ``math`` variant's within
``atol=1e-5, rtol=1e-4``. A variant that cannot run here is skipped with its own reason (on
torch 2.9 CPU: ``varlen`` and ``xformers`` need CUDA, and ``nested`` too, since the only jagged
SDPA kernel off CUDA rejects ``is_causal=True``); nothing is faked. Then the mask itself: a
document's logits do not change when another document of the same row (or the padding)
changes, and a token's logits do not change when a later token changes.

No torch_xla, CPU only, a few seconds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lazyscope_scenarios import decoder as D  # noqa: E402

P = D.Preset(dim=32, layers=1, heads=2, vocab=64, max_len=32, batch=2)
CPU = torch.device("cpu")
ATOL, RTOL = 1e-5, 1e-4  # fp32
PACKED_ROWS = [[12, 9, 7], [20, 11]]  # 5 documents; rows of 28 and 31 tokens in 32
PADDED_ROWS = [[20], [31], [5]]  # one document per row (sdpa-causal's is_causal form)
OTHERS = [name for name in sorted(D.VARIANTS) if name != "math"]


def _batch(rows: list[list[int]], seed: int = 1) -> D.Batch:
    return D.make_batch(rows, P.max_len, P.vocab, torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def weights() -> dict:
    torch.manual_seed(0)
    return D.build_model(P, D.VARIANTS["math"]).state_dict()


def _runnable(name: str, packed: bool) -> D.Variant:
    variant = D.VARIANTS[name]
    reason = variant.skip_reason("cpu", packed, "auto", torch.float32)
    if reason is not None:
        pytest.skip(reason)
    return variant


def _logits(variant: D.Variant, batch: D.Batch, weights: dict) -> torch.Tensor:
    """(N, vocab): the logits of the batch's real tokens in document order."""
    model = D.build_model(P, variant)
    model.load_state_dict(weights)
    model.eval()
    x = variant.inputs(batch, CPU)
    with torch.no_grad():
        out = model(x.inputs, x.positions, x.mask)
    logits = variant.real_logits(out, batch)
    assert logits.shape == (sum(batch.lengths), P.vocab)
    return logits


@pytest.mark.parametrize("rows", [PACKED_ROWS, PADDED_ROWS], ids=["packed", "padded"])
@pytest.mark.parametrize("name", OTHERS)
def test_every_variant_computes_the_same_logits_as_math(name, rows, weights) -> None:
    batch = _batch(rows)
    assert batch.packed == (rows is PACKED_ROWS)
    variant = _runnable(name, batch.packed)
    ref = _logits(D.VARIANTS["math"], batch, weights)
    got = _logits(variant, batch, weights)
    err = (got - ref).abs().max().item()
    assert torch.allclose(got, ref, atol=ATOL, rtol=RTOL), f"{name}: max abs diff {err:.3g}"


def _doc_slices(batch: D.Batch) -> list[tuple[int, int, int]]:
    """(row, start, end) of each document, in document order."""
    out = []
    for r in range(batch.rows):
        ids = batch.doc_ids[r]
        for d in range(int(ids.max()) + 1):
            where = (ids == d).nonzero().flatten()
            out.append((r, int(where[0]), int(where[-1]) + 1))
    return out


def _flat_index(batch: D.Batch) -> dict[tuple[int, int], int]:
    """(row, column) of a real token -> its index in the real-token order."""
    real = (batch.doc_ids >= 0).nonzero().tolist()
    return {(r, c): i for i, (r, c) in enumerate(real)}


CHECKED = ["math", *OTHERS]


@pytest.mark.parametrize("name", CHECKED)
def test_documents_of_a_packed_row_and_its_padding_do_not_see_each_other(name, weights) -> None:
    variant = _runnable(name, True)
    batch = _batch(PACKED_ROWS)
    docs = _doc_slices(batch)
    index = _flat_index(batch)
    base = _logits(variant, batch, weights)
    row, start, end = docs[1]  # the middle document of row 0: neighbours on both sides
    changed = batch.inputs.clone()
    changed[row, start:end] = (changed[row, start:end] + 7) % (P.vocab - 1) + 1
    changed[batch.doc_ids < 0] = 5  # and the padding's tokens
    after = _logits(variant, batch._replace(inputs=changed), weights)
    mine = [index[(row, c)] for c in range(start, end)]
    others = [i for i in range(len(index)) if i not in set(mine)]
    assert torch.allclose(after[others], base[others], atol=ATOL, rtol=RTOL), (
        f"{name}: changing one document moved the logits of another")
    assert not torch.allclose(after[mine], base[mine], atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("name", CHECKED)
def test_a_token_does_not_see_later_tokens(name, weights) -> None:
    variant = _runnable(name, True)
    batch = _batch(PACKED_ROWS)
    index = _flat_index(batch)
    row, start, end = _doc_slices(batch)[3]  # the first document of row 1 (20 tokens)
    at = start + 9
    base = _logits(variant, batch, weights)
    changed = batch.inputs.clone()
    changed[row, at] = changed[row, at] % (P.vocab - 1) + 1
    after = _logits(variant, batch._replace(inputs=changed), weights)
    before = [index[(row, c)] for c in range(start, at)]
    assert torch.allclose(after[before], base[before], atol=ATOL, rtol=RTOL), (
        f"{name}: a token's logits changed when a later token changed")
    assert not torch.allclose(after[index[(row, at)]], base[index[(row, at)]],
                              atol=ATOL, rtol=RTOL)
    assert not torch.allclose(after[index[(row, end - 1)]], base[index[(row, end - 1)]],
                              atol=ATOL, rtol=RTOL)


def test_each_variant_is_defined_once_in_the_registry() -> None:
    assert sorted(D.VARIANTS) == ["flex", "math", "nested", "sdpa", "sdpa-causal", "varlen",
                                  "xformers"]
    for name, v in D.VARIANTS.items():
        assert v.name == name and isinstance(v, D.Variant)
        assert v.layout in ("padded", "flex", "jagged", "concat")
    # XLA lowers the padded layouts only; the others are refused with one line
    for name, v in D.VARIANTS.items():
        reason = v.refusal("xla", "auto", "none")
        if v.layout == "padded":
            assert reason is None
        else:
            assert reason is not None and "\n" not in reason
            assert reason.startswith(f"--attention {name} is not lowered by torch_xla")
        assert v.refusal("eager", "auto", "none") is None
    assert D.VARIANTS["math"].refusal("eager", "flash", "none").startswith("--sdpa-backend")


def test_unavailable_variants_say_why() -> None:
    for name in ("varlen", "xformers"):
        reason = D.VARIANTS[name].skip_reason("cpu")
        assert reason is not None and reason.startswith(f"{name}: ")
    if importlib.util.find_spec("xformers") is None:
        assert "not installed" in D.VARIANTS["xformers"].skip_reason("cpu")


def test_the_module_loads_by_path_without_being_registered() -> None:
    """The CLI loads the scenario with spec_from_file_location and calls parse_args."""
    path = Path(D.__file__)
    spec = importlib.util.spec_from_file_location("_lazyscope_scenario_decoder_t", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "_lazyscope_scenario_decoder_t" not in sys.modules
    args = mod.parse_args(["--attention", "flex", "--padding", "pow2", "--backend", "eager"])
    assert args.attention == "flex" and args.padding == "pow2" and args.device is None
    assert set(mod.VARIANTS) == set(D.VARIANTS)
    with pytest.raises(SystemExit):
        mod.parse_args(["--attention", "bogus"])
