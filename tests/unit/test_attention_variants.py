"""Every attention variant of the decoder scenario computes the same causal decoder.

One packed batch (2 rows of 32 tokens holding 5 documents of different lengths, padding at the
end of each row) and one padded batch (one document per row) go through the same weights (dim
32, 2 heads, 1 layer, vocab 64, fp32, eval, no_grad) with each variant available on this
machine; the logits of the real tokens must match the ``math`` variant's. Every check runs in
two settings: on the CPU in fp32 (``atol=1e-5, rtol=1e-4`` against ``math`` in fp32), and on a
CUDA GPU under ``torch.autocast(bfloat16)``, the benchmark's setting, where each variant runs its
own GPU kernels (flash, efficient, cuDNN, varlen, compiled-flex ...) and is held to
``atol=3e-2, rtol=2e-2`` against ``math`` in fp32 on the same GPU: about four times the bf16
rounding of ``math`` itself (0.008 at logits of magnitude 2, measured), far below what a wrong
mask moves (a document seeing another's tokens, or a later token). The GPU setting is marked
``gpu`` and skips with its reason where no CUDA device is usable (CI). A variant that cannot run
in a setting is skipped with its own reason (on torch 2.9 CPU: ``varlen`` and ``xformers`` need
CUDA, and ``nested`` too, since the only jagged SDPA kernel off CUDA rejects
``is_causal=True``); nothing is faked. Then the mask itself: a document's logits do not change
when another document of the same row (or the padding) changes, and a token's logits do not
change when a later token changes.

No torch_xla; a few seconds on the CPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")

from lazyscope_scenarios import decoder as D  # noqa: E402

P = D.Preset(dim=32, layers=1, heads=2, vocab=64, max_len=32, batch=2)


class Setting(NamedTuple):
    """Where and how the variants run: device, autocast dtype (None: fp32) and tolerance."""

    device: str
    amp: torch.dtype | None
    atol: float
    rtol: float


SETTINGS = [
    pytest.param(Setting("cpu", None, 1e-5, 1e-4), id="cpu-fp32"),
    # the bf16 tolerance, checked on the CPU's bf16 kernels too (math, sdpa, flex run there)
    pytest.param(Setting("cpu", torch.bfloat16, 3e-2, 2e-2), id="cpu-bf16"),
    pytest.param(Setting("cuda", torch.bfloat16, 3e-2, 2e-2), id="cuda-bf16",
                 marks=pytest.mark.gpu),
]
PACKED_ROWS = [[12, 9, 7], [20, 11]]  # 5 documents; rows of 28 and 31 tokens in 32
PADDED_ROWS = [[20], [31], [5]]  # one document per row (sdpa-causal's is_causal form)
OTHERS = [name for name in sorted(D.VARIANTS) if name != "math"]


def _batch(rows: list[list[int]], seed: int = 1) -> D.Batch:
    return D.make_batch(rows, P.max_len, P.vocab, torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def weights() -> dict:
    torch.manual_seed(0)
    return D.build_model(P, D.VARIANTS["math"]).state_dict()


def _usable(setting: Setting) -> Setting:
    if setting.device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device: the bf16 GPU check of the variants needs one")
    return setting


def _runnable(name: str, packed: bool, setting: Setting) -> D.Variant:
    variant = D.VARIANTS[name]
    reason = variant.skip_reason(setting.device, packed, "auto", setting.amp or torch.float32)
    if reason is not None:
        pytest.skip(reason)
    return variant


def _logits(variant: D.Variant, batch: D.Batch, weights: dict, setting: Setting,
            amp: bool = True) -> torch.Tensor:
    """(N, vocab) fp32: the logits of the batch's real tokens in document order, under the
    setting's autocast unless ``amp`` is False (the fp32 reference)."""
    dev = torch.device(setting.device)
    model = D.build_model(P, variant).to(dev)
    model.load_state_dict(weights)
    model.eval()
    x = variant.inputs(batch, dev)
    cast = (torch.autocast(dev.type, dtype=setting.amp) if amp and setting.amp is not None
            else contextlib.nullcontext())
    with torch.no_grad(), cast:
        out = model(x.inputs, x.positions, x.mask)
    logits = variant.real_logits(out, batch).float().cpu()
    assert logits.shape == (sum(batch.lengths), P.vocab)
    return logits


def _close(a: torch.Tensor, b: torch.Tensor, setting: Setting) -> bool:
    return torch.allclose(a, b, atol=setting.atol, rtol=setting.rtol)


def _moved(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The change reached these logits at all (the checks' own control: a mask that hid
    everything would pass the 'did not move' half). A later token's pull on an earlier one can
    be under the bf16 tolerance, so any difference counts."""
    return not torch.equal(a, b)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("rows", [PACKED_ROWS, PADDED_ROWS], ids=["packed", "padded"])
@pytest.mark.parametrize("name", ["math", *OTHERS])
def test_every_variant_computes_the_same_logits_as_math(name, rows, setting, weights) -> None:
    setting = _usable(setting)
    batch = _batch(rows)
    assert batch.packed == (rows is PACKED_ROWS)
    variant = _runnable(name, batch.packed, setting)
    ref = _logits(D.VARIANTS["math"], batch, weights, setting, amp=False)
    got = _logits(variant, batch, weights, setting)
    err = (got - ref).abs().max().item()
    print(f"{name} {setting.device} {setting.amp}: max abs diff {err:.3g}")
    assert _close(got, ref, setting), (
        f"{name} on {setting.device} ({setting.amp or 'fp32'}): max abs diff {err:.3g} "
        f"(atol {setting.atol}, rtol {setting.rtol})")


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


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("name", CHECKED)
def test_documents_of_a_packed_row_and_its_padding_do_not_see_each_other(
        name, setting, weights) -> None:
    setting = _usable(setting)
    variant = _runnable(name, True, setting)
    batch = _batch(PACKED_ROWS)
    docs = _doc_slices(batch)
    index = _flat_index(batch)
    base = _logits(variant, batch, weights, setting)
    row, start, end = docs[1]  # the middle document of row 0: neighbours on both sides
    changed = batch.inputs.clone()
    changed[row, start:end] = (changed[row, start:end] + 7) % (P.vocab - 1) + 1
    changed[batch.doc_ids < 0] = 5  # and the padding's tokens
    after = _logits(variant, batch._replace(inputs=changed), weights, setting)
    mine = [index[(row, c)] for c in range(start, end)]
    others = [i for i in range(len(index)) if i not in set(mine)]
    assert _close(after[others], base[others], setting), (
        f"{name}: changing one document moved the logits of another")
    assert _moved(after[mine], base[mine])


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("name", CHECKED)
def test_a_token_does_not_see_later_tokens(name, setting, weights) -> None:
    setting = _usable(setting)
    variant = _runnable(name, True, setting)
    batch = _batch(PACKED_ROWS)
    index = _flat_index(batch)
    row, start, end = _doc_slices(batch)[3]  # the first document of row 1 (20 tokens)
    at = start + 9
    base = _logits(variant, batch, weights, setting)
    changed = batch.inputs.clone()
    changed[row, at] = changed[row, at] % (P.vocab - 1) + 1
    after = _logits(variant, batch._replace(inputs=changed), weights, setting)
    before = [index[(row, c)] for c in range(start, at)]
    assert _close(after[before], base[before], setting), (
        f"{name}: a token's logits changed when a later token changed")
    assert _moved(after[index[(row, at)]], base[index[(row, at)]])
    assert _moved(after[index[(row, end - 1)]], base[index[(row, end - 1)]])


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
