"""GPT-style decoder on variable-length sequences: what each padding policy costs on XLA.

The model is the one of "FlashAttention2 and xFormers on PyTorch" (seeds/000): pre-norm blocks
with a fused qkv projection, GELU MLP, learned positions and an LM head. Sequence lengths are
uniform in 1..max-1 (the article's ``randint(1, MAX_SEQ_LEN)``) or drawn from ``--lengths FILE``;
everything is seeded. Padding policies (``lazyscope.padding``, shared with the bucket advisor):

* ``max``       pad every batch to the max length: one static shape, about half of it padding
* ``longest``   pad to the longest sequence of the batch: a new shape, so a new XLA graph, for
                almost every batch
* ``pow2``      pad to the next power of two from 16 (capped at the max length)
* ``bucket:B1,B2,...``  pad to the smallest listed bucket that fits (the max length is added)
* ``bucket:auto``       buckets from lazyscope's exact advisor on this run's own length stream
* ``packed``    sequences packed best-fit into ``batch`` rows of the max length, attention masked
                by document id inside each row, positions restarting per document: one static
                shape and little padding (the XLA-friendly form of flash-attn varlen / xFormers
                BlockDiagonalMask)

    python -m lazyscope.scenarios.decoder --padding longest --steps 10
    lazyscope trace decoder --padding bucket:auto --batching grouped --steps 40
    lazyscope compare decoder --policies max,longest,pow2,bucket:auto,packed --steps 40

Attention (``--attention``): every variant computes the same function, a causal decoder, in
training and in evaluation alike: a token attends to itself and to the earlier tokens of its own
document (packed rows and concatenated layouts included), and no real token ever attends to
padding. So their times compare. Each variant is one :class:`Variant` in ``VARIANTS`` holding
its layout, how a host batch becomes its device inputs and mask, its attention call, and why it
is refused on a backend or skipped on this machine:

* ``sdpa``        SDPA with an explicit boolean document-and-causal mask (padded rows)
* ``sdpa-causal`` SDPA ``is_causal=True`` (one document per row: padding sits at the end, so
                  causality hides it); packed rows keep the document-and-causal mask
* ``math``        nanoGPT's explicit attention with the same mask (the reference)
* ``nested``      NestedTensor, jagged layout, SDPA ``is_causal=True`` (one ragged sequence per
                  document)
* ``varlen``      all documents concatenated into one row, ``cu_seqlens``: PyTorch's own
                  ``torch.nn.attention.varlen.varlen_attn`` when the installed torch has it,
                  else ``flash_attn.flash_attn_varlen_func`` (CUDA)
* ``flex``        FlexAttention with a document-and-causal ``BlockMask`` over the padded batch
* ``xformers``    concatenated documents, xFormers ``BlockDiagonalCausalMask`` (CUDA)

``--sdpa-backend math|flash|efficient|cudnn`` runs SDPA inside ``torch.nn.attention.sdpa_kernel``
(the nanoGPT article's kernel choice); ``--vocab`` overrides the preset's vocabulary (GPT-2's
50257 against the padded 50304). A variant the backend cannot lower (XLA lowers only the padded
ones: sdpa, sdpa-causal, math) is refused (exit 2, one line). A variant that is not installed or
cannot run here (needs CUDA; torch 2.9's only jagged SDPA kernel off CUDA rejects
``is_causal=True``, so ``nested`` needs a GPU) is *skipped*: the run ends ``ok`` with zero steps,
``meta.info["skipped"]`` and the note ``skipped: <reason>``; nothing is faked.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

# NamedTuple and plain classes, not dataclasses: the CLI loads this file by path without
# registering it in sys.modules, and a dataclass defined in such a module fails to build.
import lazyscope
from lazyscope.padding import (
    Packer,
    length_stream,
    padded_length,
    padding_policy,
    plan_batches,
    policy_buckets,
)
from lazyscope.scenarios.kit import (
    base_parser,
    lengths_file,
    n_params,
    positive_int,
    runtime_from_args,
)


class Preset(NamedTuple):
    dim: int
    layers: int
    heads: int
    vocab: int
    max_len: int
    batch: int


PRESETS: dict[str, Preset] = {
    "tiny": Preset(dim=128, layers=2, heads=4, vocab=1024, max_len=256, batch=8),
    "seed": Preset(dim=1024, layers=24, heads=16, vocab=1024, max_len=1024, batch=32),
}

PAD_TARGET = -100  # cross-entropy's ignore_index

SDPA_BACKENDS = ["auto", "math", "flash", "efficient", "cudnn"]
_SDPA_ENUM = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION"}


# ------------------------------------------------------------------------------ the data


class Batch(NamedTuple):
    """Host tensors for one step: token ids, targets, document ids (-1 = padding), positions
    (restarting at 0 in each document); ``packed``: rows may hold several documents."""

    inputs: Any
    targets: Any
    doc_ids: Any
    positions: Any
    lengths: list[int]
    seq_len: int
    packed: bool = False

    @property
    def rows(self) -> int:
        return int(self.inputs.shape[0])


def make_batch(rows: list[list[int]], seq_len: int, vocab: int, gen: Any,
               packed: bool | None = None) -> Batch:
    """Rows of documents (lengths) -> padded tensors; each document gets fresh random tokens.
    ``packed`` defaults to whether some row holds more than one document."""
    import torch

    n = len(rows)
    inputs = torch.zeros((n, seq_len), dtype=torch.long)
    targets = torch.full((n, seq_len), PAD_TARGET, dtype=torch.long)
    doc_ids = torch.full((n, seq_len), -1, dtype=torch.long)
    positions = torch.zeros((n, seq_len), dtype=torch.long)
    lengths = []
    for r, docs in enumerate(rows):
        at = 0
        for d, length in enumerate(docs):
            seq = torch.randint(1, vocab, (length + 1,), generator=gen)
            inputs[r, at:at + length] = seq[:-1]
            targets[r, at:at + length] = seq[1:]
            doc_ids[r, at:at + length] = d
            positions[r, at:at + length] = torch.arange(length)
            at += length
            lengths.append(length)
    if packed is None:
        packed = any(len(docs) > 1 for docs in rows)
    return Batch(inputs, targets, doc_ids, positions, lengths, seq_len, packed)


class Inputs(NamedTuple):
    """One step's device tensors in the attention variant's layout."""

    inputs: Any
    positions: Any
    targets: Any  # flat (N,) targets for the loss
    mask: Any  # whatever the variant's attend() takes (None, a bool mask, a BlockMask ...)
    seq_len: int  # the length the step computes over (padded length, or the concat row)
    computed: int  # tokens computed


def document_causal_mask(doc_ids: Any) -> Any:
    """(B, 1, L, L) bool: query i may attend to key j iff both are in the same document and
    j <= i. Padding (id -1) attends only to earlier padding, so no row is empty and no real
    token sees padding."""
    import torch

    n = doc_ids.shape[1]
    same = doc_ids[:, :, None] == doc_ids[:, None, :]
    tril = torch.ones((n, n), dtype=torch.bool, device=doc_ids.device).tril()
    return (same & tril[None])[:, None]


def concatenated(batch: Batch) -> tuple[Any, Any, Any, Any]:
    """The real tokens of a host batch in row-major order (make_batch's document order):
    ``(tokens, positions, targets, offsets)``, offsets the int32 ``cu_seqlens`` (D + 1,)."""
    import torch

    real = batch.doc_ids >= 0
    lengths = torch.tensor(batch.lengths, dtype=torch.int32)
    offsets = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    return batch.inputs[real], batch.positions[real], batch.targets[real], offsets


# ----------------------------------------------------------------------------- attention


def _names(pred: Callable[[Variant], bool]) -> str:
    """'a, b or c': the variants for which ``pred`` holds."""
    names = [v.name for v in VARIANTS.values() if pred(v)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


class Variant:
    """One attention variant, in full: its layout, how a host :class:`Batch` becomes its
    device :class:`Inputs` (mask included), its causal attention call, and why it is refused
    on a backend or skipped on this machine. ``VARIANTS`` holds one instance of each.

    Layouts: ``padded`` (B, L) rows with a (B, 1, L, L) mask; ``flex`` padded rows with a
    ``BlockMask``; ``jagged`` one NestedTensor sequence per document; ``concat`` every
    document in one (1, N) row. The default methods are the padded layout's."""

    name = ""
    layout = "padded"
    summary = ""
    #: torch_xla lowers it (the padded layouts)
    xla = False
    #: it calls torch SDPA, so ``--sdpa-backend`` applies
    sdpa = False

    @property
    def padded(self) -> bool:
        """Computes over padded rows (padding costs compute), rather than real tokens only."""
        return self.layout in ("padded", "flex")

    # -- data ------------------------------------------------------------------------------
    def inputs(self, batch: Batch, dev: Any) -> Inputs:
        """Host batch -> this variant's device tensors (padded rows here)."""
        return Inputs(batch.inputs.to(dev), batch.positions.to(dev),
                      batch.targets.to(dev).reshape(-1), self.mask(batch, dev),
                      batch.seq_len, batch.rows * batch.seq_len)

    def mask(self, batch: Batch, dev: Any) -> Any:
        """The padded layout's mask: document and causal."""
        return document_causal_mask(batch.doc_ids.to(dev))

    def real_logits(self, logits: Any, batch: Batch) -> Any:
        """(N, vocab): the model's output at the real tokens, in row-major document order."""
        return logits[batch.doc_ids.to(logits.device) >= 0]

    # -- compute ---------------------------------------------------------------------------
    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """Causal attention of q, k, v (B, H, L, D) under ``mask`` (from :meth:`inputs`)."""
        raise NotImplementedError

    # -- where it runs ---------------------------------------------------------------------
    def refusal(self, backend: str, sdpa_backend: str, autocast: str) -> str | None:
        """Why this combination can never run (bad input, exit 2), or None."""
        if backend == "xla":
            if not self.xla:
                return (f"--attention {self.name} is not lowered by torch_xla; on --backend xla "
                        f"use {_names(lambda v: v.xla)} (--padding packed gives the document "
                        f"mask), or run {self.name} with --backend eager|compile")
            if sdpa_backend != "auto":
                return ("--sdpa-backend picks a PyTorch SDPA kernel (eager/compile backends); "
                        "torch_xla lowers SDPA itself: leave it auto on --backend xla")
            if autocast != "none":
                return "--autocast is for the eager/compile backends"
        if sdpa_backend != "auto" and not self.sdpa:
            return (f"--sdpa-backend applies to {_names(lambda v: v.sdpa)}, not to "
                    f"{self.name}")
        return None

    def unavailable(self, device: str) -> str | None:
        """Why this variant cannot run on ``device`` here (not installed, needs CUDA, no
        kernel), or None."""
        return None

    def skip_reason(self, device: str, packed: bool = False, sdpa_backend: str = "auto",
                    dtype: Any = None) -> str | None:
        """Why this run is skipped on this machine, or None: the variant is unavailable, or
        the chosen SDPA kernel cannot take its inputs (probed with one tiny forward)."""
        reason = self.unavailable(device)
        if reason is None and sdpa_backend != "auto":
            import torch

            dtype = dtype or torch.float32
            enum = _SDPA_ENUM[sdpa_backend]
            from torch.nn.attention import SDPBackend

            if getattr(SDPBackend, enum, None) is None:
                return (f"--sdpa-backend {sdpa_backend}: torch {torch.__version__} has no "
                        f"SDPBackend.{enum}")
            err = probe(self, device, packed, sdpa_backend, dtype)
            if err is not None:
                reason = (f"--sdpa-backend {sdpa_backend}: no usable {sdpa_backend} SDPA kernel "
                          f"on {device} for {self.name}'s inputs ({dtype}): torch says: {err}")
        return reason

    def notes(self, runtime: str) -> list[str]:
        """Lines for the run's notes on this runtime (``eager``, ``compile``, ``xla``)."""
        return []


class Sdpa(Variant):
    name = "sdpa"
    summary = "SDPA with the document-and-causal mask"
    xla = sdpa = True

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        import torch.nn.functional as F

        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class SdpaCausal(Sdpa):
    name = "sdpa-causal"
    summary = "is_causal=True (packed rows keep the document-and-causal mask)"

    def mask(self, batch: Batch, dev: Any) -> Any:
        # one document per row, padding at its end: causality alone hides the padding
        return super().mask(batch, dev) if batch.packed else None

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        import torch.nn.functional as F

        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Math(Variant):
    name = "math"
    summary = "explicit scores, masked_fill, softmax (the reference)"
    xla = True

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """nanoGPT's explicit attention: scores, masked_fill(-inf), softmax, weighted sum."""
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        att = att.masked_fill(~mask, float("-inf"))
        return att.softmax(dim=-1) @ v


class Nested(Variant):
    name = "nested"
    layout = "jagged"
    summary = "jagged NestedTensor + SDPA is_causal=True (CUDA)"
    sdpa = True

    def inputs(self, batch: Batch, dev: Any) -> Inputs:
        import torch

        tokens, positions, targets, offsets = concatenated(batch)
        off = offsets.to(dev, torch.long)
        return Inputs(torch.nested.nested_tensor_from_jagged(tokens.to(dev), off),
                      torch.nested.nested_tensor_from_jagged(positions.to(dev), off),
                      targets.to(dev), None, max(batch.lengths), int(tokens.shape[0]))

    def real_logits(self, logits: Any, batch: Batch) -> Any:
        return logits.values()

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """SDPA on jagged NestedTensors (B, H, j, D): no padding, no mask.

        Off CUDA the only jagged kernel is math, which wants each of q/k/v contiguous in
        (B, j, H, D): the views ``chunk`` made are copied once there."""
        import torch.nn.functional as F

        if q.device.type != "cuda":
            q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def unavailable(self, device: str) -> str | None:
        import torch

        err = probe(self, device, True, "auto", torch.float32)
        if err is None:
            return None
        why = ("off CUDA its only jagged SDPA kernel, math, rejects is_causal=True: it needs a "
               "CUDA GPU" if device != "cuda" else f"torch says: {err}")
        return (f"nested: torch {torch.__version__} has no causal jagged-NestedTensor SDPA on "
                f"{device} ({why})")


def _varlen_impl() -> tuple[str, Callable[..., Any]] | None:
    """PyTorch's own varlen attention when this torch has it, else flash-attn's, else None."""
    try:
        fn = getattr(importlib.import_module("torch.nn.attention.varlen"), "varlen_attn", None)
        if fn is not None:
            return "torch.nn.attention.varlen.varlen_attn", fn
    except ImportError:
        pass
    if importlib.util.find_spec("flash_attn") is not None:
        from flash_attn import flash_attn_varlen_func

        return "flash_attn.flash_attn_varlen_func", flash_attn_varlen_func
    return None


class Concat(Variant):
    """Every document of the batch in one (1, N) row; the mask says where each one starts."""

    layout = "concat"

    def inputs(self, batch: Batch, dev: Any) -> Inputs:
        tokens, positions, targets, offsets = concatenated(batch)
        total = int(tokens.shape[0])
        return Inputs(tokens[None].to(dev), positions[None].to(dev), targets.to(dev),
                      self.concat_mask(batch, offsets, dev), total, total)

    def concat_mask(self, batch: Batch, offsets: Any, dev: Any) -> Any:
        raise NotImplementedError

    def real_logits(self, logits: Any, batch: Batch) -> Any:
        return logits[0]


class Varlen(Concat):
    name = "varlen"
    summary = "cu_seqlens varlen attention, causal (CUDA)"

    def concat_mask(self, batch: Batch, offsets: Any, dev: Any) -> Any:
        return offsets.to(dev), max(batch.lengths)

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """``mask`` is ``(cu_seqlens, max_seqlen)``; q/k/v (1, H, N, D) become (N, H, D) as
        the varlen APIs take them."""
        cu, max_len = mask
        impl = _varlen_impl()
        assert impl is not None, "varlen attention is not available (checked before the run)"
        name, fn = impl
        q1, k1, v1 = (t[0].transpose(0, 1) for t in (q, k, v))
        if name.startswith("torch"):
            out = fn(q1, k1, v1, cu, cu, max_len, max_len, is_causal=True)
        else:
            out = fn(q1, k1, v1, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len,
                     max_seqlen_k=max_len, causal=True)
        return out.transpose(0, 1)[None]

    def unavailable(self, device: str) -> str | None:
        import torch

        impl = _varlen_impl()
        if impl is None:
            return (f"varlen: torch {torch.__version__} has no torch.nn.attention.varlen and "
                    "flash-attn is not installed (pip install flash-attn; it needs a CUDA GPU)")
        if device != "cuda":
            return f"varlen: {impl[0]} needs a CUDA device (this run is on {device})"
        if impl[0].startswith("torch"):
            try:
                params = inspect.signature(impl[1]).parameters
            except (TypeError, ValueError):
                params = {}
            if params and "is_causal" not in params:
                return (f"varlen: this torch's {impl[0]} takes no is_causal: it cannot run "
                        "the causal decoder")
        return None


class Flex(Variant):
    name = "flex"
    layout = "flex"
    summary = "FlexAttention + document-and-causal BlockMask"

    def mask(self, batch: Batch, dev: Any) -> Any:
        from torch.nn.attention.flex_attention import create_block_mask

        doc = batch.doc_ids.to(dev)

        def causal_document(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

        n = batch.seq_len
        return create_block_mask(causal_document, batch.rows, None, n, n, device=str(dev))

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        from torch.nn.attention.flex_attention import flex_attention

        return flex_attention(q, k, v, block_mask=mask)

    def unavailable(self, device: str) -> str | None:
        if importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
            import torch

            return f"flex: torch {torch.__version__} has no torch.nn.attention.flex_attention"
        return None

    def notes(self, runtime: str) -> list[str]:
        if runtime == "compile":
            return []
        return ["flex: flex_attention outside torch.compile runs PyTorch's unfused reference "
                "implementation (it materialises the full score matrix); --backend compile "
                "generates the fused kernel"]


class XFormers(Concat):
    name = "xformers"
    summary = "xFormers BlockDiagonalCausalMask (CUDA)"

    def concat_mask(self, batch: Batch, offsets: Any, dev: Any) -> Any:
        from xformers.ops import fmha

        return fmha.BlockDiagonalCausalMask.from_seqlens(list(batch.lengths), device=dev)

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """memory_efficient_attention takes (B, M, H, K)."""
        from xformers.ops import memory_efficient_attention

        q1, k1, v1 = (t.transpose(1, 2) for t in (q, k, v))
        return memory_efficient_attention(q1, k1, v1, attn_bias=mask).transpose(1, 2)

    def unavailable(self, device: str) -> str | None:
        if importlib.util.find_spec("xformers") is None:
            return ("xformers: xformers is not installed (pip install xformers; its "
                    "BlockDiagonalCausalMask attention needs a CUDA GPU)")
        if device != "cuda":
            return ("xformers: memory_efficient_attention with BlockDiagonalCausalMask needs "
                    f"CUDA (this run is on {device})")
        return None


#: every attention variant, by its --attention name
VARIANTS: dict[str, Variant] = {
    v.name: v for v in (Sdpa(), SdpaCausal(), Math(), Nested(), Varlen(), Flex(), XFormers())
}


def sdpa_context(name: str) -> Any:
    """``sdpa_kernel([SDPBackend.X])`` for a chosen kernel, else a no-op context."""
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, _SDPA_ENUM[name])])


def probe(variant: Variant, device: str, packed: bool, sdpa_backend: str,
          dtype: Any) -> str | None:
    """Run one tiny forward of ``variant`` (its real layout and attention call) on ``device``
    under the SDPA kernel choice and dtype: the first line of torch's error, or None."""
    import torch

    tiny = Preset(dim=32, layers=1, heads=2, vocab=16, max_len=8, batch=2)
    rows = [[5, 3], [8]] if packed else [[5], [8]]
    batch = make_batch(rows, 8, tiny.vocab, torch.Generator().manual_seed(0), packed)
    dev = torch.device(device)
    amp = (torch.autocast(dev.type, dtype=dtype) if dtype != torch.float32
           else contextlib.nullcontext())
    try:
        # fork_rng: the probe's model must not move the run's seeded weights
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]), torch.no_grad(), \
                amp, sdpa_context(sdpa_backend):
            warnings.simplefilter("ignore")
            model = build_model(tiny, variant).to(dev)
            x = variant.inputs(batch, dev)
            model(x.inputs, x.positions, x.mask)
    except Exception as err:  # noqa: BLE001 - whatever torch raises, the variant cannot run
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()),
                     type(err).__name__)
        return first[:200]
    return None


# --------------------------------------------------------------------------------- model


def build_model(p: Preset, variant: Variant | str, graph_break: bool = False) -> Any:
    """The decoder with ``variant``'s attention (a Variant or its name)."""
    import torch
    from torch import nn

    attend = (VARIANTS[variant] if isinstance(variant, str) else variant).attend

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads, self.head_dim = p.heads, p.dim // p.heads
            self.norm1 = nn.LayerNorm(p.dim, bias=False)
            self.norm2 = nn.LayerNorm(p.dim, bias=False)
            self.qkv = nn.Linear(p.dim, 3 * p.dim)
            self.proj = nn.Linear(p.dim, p.dim)
            self.fc1 = nn.Linear(p.dim, 4 * p.dim)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * p.dim, p.dim)

        def forward(self, x_in: torch.Tensor, mask: Any) -> torch.Tensor:
            # (b, -1, ...) rather than (b, n, ...): a jagged NestedTensor's n is ragged
            b = x_in.shape[0]
            q, k, v = self.qkv(self.norm1(x_in)).chunk(3, -1)
            q, k, v = (t.view(b, -1, self.heads, self.head_dim).transpose(1, 2)
                       for t in (q, k, v))
            x = attend(q, k, v, mask)
            x = x_in + self.proj(x.transpose(1, 2).reshape(b, -1, p.dim))
            return x + self.fc2(self.act(self.fc1(self.norm2(x))))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(p.vocab, p.dim)
            self.positional_embedding = nn.Embedding(p.max_len, p.dim)
            self.blocks = nn.ModuleList([Block() for _ in range(p.layers)])
            self.norm = nn.LayerNorm(p.dim, bias=False)
            self.output = nn.Linear(p.dim, p.vocab)

        def forward(self, inputs: torch.Tensor, positions: torch.Tensor,
                    mask: Any) -> torch.Tensor:
            x = self.embedding(inputs) + self.positional_embedding(positions)
            if graph_break:
                torch._dynamo.graph_break()  # planted graph break (--graph-break)
            for blk in self.blocks:
                x = blk(x, mask)
            return self.output(self.norm(x))

    return Decoder()


# ------------------------------------------------------------------------------ arguments


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=40)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                        help="tiny: 2 layers, dim 128 (CPU); seed: the article's 24 x 1024")
    parser.add_argument("--mode", choices=["train", "eval"], default="train",
                        help="train: causal LM loss, backward, optimizer step; eval: forward "
                        "(the same causal attention)")
    parser.add_argument("--padding", type=padding_policy, default="max",
                        help="max | longest | pow2 | bucket:B1,B2,... | bucket:auto | packed")
    parser.add_argument("--batching", choices=["random", "grouped"], default="random",
                        help="random batches, or a length-grouped sampler (sorted pools)")
    parser.add_argument("--attention", choices=sorted(VARIANTS), default="sdpa",
                        help="every variant is causal within each document; "
                        + "; ".join(f"{v.name}: {v.summary}" for v in VARIANTS.values()))
    parser.add_argument("--sdpa-backend", choices=SDPA_BACKENDS, default="auto",
                        help="SDPA kernel (torch.nn.attention.sdpa_kernel) for "
                        f"{_names(lambda v: v.sdpa)} on the eager/compile backends")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: torch.autocast around forward and loss (the article's "
                        "setting on the GPU; eager/compile backends)")
    parser.add_argument("--graph-break", action="store_true",
                        help="plant torch._dynamo.graph_break() in the model's forward (a graph "
                        "break under --backend compile, a no-op elsewhere)")
    parser.add_argument("--vocab", type=positive_int, default=None,
                        help="override the preset's vocabulary (e.g. GPT-2's 50257 against the "
                        "padded 50304)")
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--lengths", type=lengths_file, default=None, metavar="FILE",
                        help="draw lengths from this file (one per line) instead of uniform")
    parser.add_argument("--batch", type=positive_int, default=None, help="override the preset")
    parser.add_argument("--max-len", type=positive_int, default=None,
                        help="override the preset's max length (positions, pad-to-max)")
    parser.add_argument("--max-buckets", type=positive_int, default=8,
                        help="K limit for bucket:auto")
    parser.add_argument("--horizon", type=positive_int, default=None,
                        help="steps bucket:auto plans for (default --steps): a long horizon "
                        "amortises more compilations, so it can pick more buckets")
    return parser


def resolve(args: argparse.Namespace) -> Preset:
    p = PRESETS[args.preset]
    if args.batch or args.max_len or args.vocab:
        p = Preset(p.dim, p.layers, p.heads, args.vocab or p.vocab, args.max_len or p.max_len,
                   args.batch or p.batch)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments (the CLI calls this before anything runs)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    p = resolve(args)
    if args.lengths and max(args.lengths) > p.max_len:
        parser.error(f"--lengths holds length {max(args.lengths)} > max length {p.max_len}")
    return args


# ---------------------------------------------------------------------------------- main


def plan_buckets(args: argparse.Namespace, p: Preset,
                 planned: list[list[int]]) -> tuple[list[int], dict[str, Any] | None]:
    """The boundaries this run pads to, and the advisor's answer for bucket:auto."""
    if args.padding != "bucket:auto":
        return policy_buckets(args.padding, p.max_len), None
    from lazyscope.analyze.buckets import (
        COMPILE_PRIOR_STEPS,
        CostModel,
        advise,
        cost_model_from_info,
    )

    base = cost_model_from_info(p._asdict())
    prior = CostModel(crossover=base.crossover,
                      compile_s=COMPILE_PRIOR_STEPS * p.batch * base.row(p.max_len))
    advice = advise([n for b in planned for n in b], batch=p.batch, top=p.max_len,
                    max_buckets=args.max_buckets, grouped=args.batching == "grouped",
                    horizon=args.horizon or args.steps, model=prior)
    return list(advice["best"]["boundaries"]), advice


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    p = resolve(args)
    variant = VARIANTS[args.attention]
    refused = variant.refusal(args.backend, args.sdpa_backend, args.autocast)
    if refused is not None:
        from lazyscope.errors import UsageError

        raise UsageError(refused)
    import torch

    runtime = runtime_from_args(args)
    dev = runtime.device()
    gen = torch.Generator().manual_seed(args.seed + 1)
    stream = length_stream(args.seed, p.max_len, args.lengths)
    packed = args.padding == "packed"
    planned = ([] if packed else
               plan_batches(stream, args.steps, p.batch, args.batching == "grouped"))
    buckets, advice = plan_buckets(args, p, planned)
    train = args.mode == "train"
    info = dict(
        scenario="decoder", preset=args.preset, policy=args.padding, batching=args.batching,
        mode=args.mode, attention=variant.name, layout=variant.layout, causal=True,
        sdpa_backend=args.sdpa_backend, autocast=args.autocast, optimizer=args.optimizer,
        buckets=buckets, graph_break=args.graph_break,
        dim=p.dim, layers=p.layers, heads=p.heads, vocab=p.vocab, max_len=p.max_len,
        batch=p.batch, seed=args.seed, lengths_source="file" if args.lengths else "uniform",
        advice_k=advice["best"]["buckets"] if advice else None,
    )
    dtype = torch.bfloat16 if args.autocast == "bf16" else torch.float32
    reason = variant.skip_reason(dev.type, packed, args.sdpa_backend, dtype)
    if reason is not None:
        # not installed / needs a GPU / no kernel: an ok run with zero steps, never faked
        lazyscope.set_info(**info, skipped=reason)
        lazyscope.note(f"skipped: {reason}")
        print(f"decoder {args.preset} {args.mode} attention={variant.name}: skipped: {reason}")
        return 0
    for line in variant.notes(runtime.name):
        lazyscope.note(line)
    torch.manual_seed(args.seed)
    model = build_model(p, variant, args.graph_break).to(dev)
    model = runtime.prepare_model(model)
    model.train(train)
    opt: Any = None
    if train:
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if args.optimizer == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4))
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_TARGET)
    lazyscope.set_info(**info, params=n_params(model))
    packer = Packer(stream, p.batch, p.max_len) if packed else None

    def forward_loss(x: Inputs) -> Any:
        amp = (torch.autocast(dev.type, dtype=torch.bfloat16) if args.autocast == "bf16"
               else contextlib.nullcontext())
        with amp, sdpa_context(args.sdpa_backend):
            logits = model(x.inputs, x.positions, x.mask)
            flat = logits.values() if logits.is_nested else logits.reshape(-1, p.vocab)
            return criterion(flat.float(), x.targets)

    real_total = computed_total = 0
    loss = None
    t0 = time.perf_counter()
    for i in range(args.steps):
        if packer is not None:
            rows = [[n for _, n in row] for row in packer.next_rows()]
            seq_len = p.max_len
        else:
            lens = planned[i]
            rows = [[n] for n in lens]
            seq_len = padded_length(args.padding, max(lens), p.max_len, buckets)
        batch = make_batch(rows, seq_len, p.vocab, gen, packed)
        real = sum(batch.lengths)
        computed = batch.rows * seq_len if variant.padded else real
        real_total += real
        computed_total += computed
        lazyscope.annotate_step(real_tokens=real, computed_tokens=computed,
                                seq_len=seq_len if variant.padded else real,
                                batch_max_len=max(batch.lengths), rows=batch.rows,
                                lengths=batch.lengths)
        with runtime.step(i, "train_step" if train else "eval_step"):
            x = variant.inputs(batch, dev)
            if train:
                with runtime.region("forward"):
                    loss = forward_loss(x)
                with runtime.region("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                with runtime.region("optimizer"):
                    opt.step()
            else:
                with torch.no_grad(), runtime.region("forward"):
                    loss = forward_loss(x)
    final = float(loss.item()) if loss is not None else float("nan")  # waits for the device
    wall = time.perf_counter() - t0
    print(
        f"decoder {args.preset} {args.mode} padding={args.padding} batching={args.batching} "
        f"attention={variant.name}: {args.steps} steps in {wall:.1f} s, "
        f"{real_total / wall:.0f} real tokens/s, padding efficiency "
        f"{real_total / max(1, computed_total):.2f}, buckets {buckets or '-'}, loss {final:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
