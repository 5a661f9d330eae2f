"""The decoder model: its presets (the seed article's 24-layer model, and a tiny one), the
attention variants (each computes the same causal document attention on its own layout)
and the model built around one."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from lazyscope_scenarios.decoder.data import (
    Batch,
    Inputs,
    Staged,
    concatenated_staged,
    document_causal_mask,
    make_batch,
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


SDPA_BACKENDS = ["auto", "math", "flash", "efficient", "cudnn"]
_SDPA_ENUM = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION"}



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
        """Host batch -> this variant's device tensors: :meth:`stage` then :meth:`to_device`."""
        return self.to_device(self.stage(batch), dev)

    def stage(self, batch: Batch) -> Staged:
        """The host tensors of this variant's layout (made where the batch is made: in a
        ``DataLoader`` worker with ``--workers``); padded rows here."""
        return Staged({"inputs": batch.inputs, "positions": batch.positions,
                       "targets": batch.targets.reshape(-1), "doc_ids": batch.doc_ids},
                      batch.lengths, batch.seq_len, batch.rows, batch.packed,
                      batch.rows * batch.seq_len)

    def to_device(self, staged: Staged, dev: Any) -> Inputs:
        """Staged host tensors -> this variant's device :class:`Inputs` (copies that do not
        block the host from pinned memory)."""
        t = {k: v.to(dev, non_blocking=True) for k, v in staged.tensors.items()}
        return Inputs(t["inputs"], t["positions"], t["targets"], self.mask(t, staged, dev),
                      staged.seq_len, staged.computed)

    def mask(self, t: dict[str, Any], staged: Staged, dev: Any) -> Any:
        """The padded layout's mask (document and causal) from the device tensors ``t``."""
        return document_causal_mask(t["doc_ids"])

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

    def mask(self, t: dict[str, Any], staged: Staged, dev: Any) -> Any:
        # one document per row, padding at its end: causality alone hides the padding
        return super().mask(t, staged, dev) if staged.packed else None

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

    def stage(self, batch: Batch) -> Staged:
        return concatenated_staged(batch)

    def to_device(self, staged: Staged, dev: Any) -> Inputs:
        import torch

        t = {k: v.to(dev, non_blocking=True) for k, v in staged.tensors.items()}
        off = t["offsets"].to(torch.long)
        return Inputs(torch.nested.nested_tensor_from_jagged(t["tokens"], off),
                      torch.nested.nested_tensor_from_jagged(t["positions"], off),
                      t["targets"], None, max(staged.lengths), staged.computed)

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

    def stage(self, batch: Batch) -> Staged:
        return concatenated_staged(batch)

    def to_device(self, staged: Staged, dev: Any) -> Inputs:
        t = {k: v.to(dev, non_blocking=True) for k, v in staged.tensors.items()}
        return Inputs(t["tokens"][None], t["positions"][None], t["targets"],
                      self.concat_mask(t["offsets"], staged, dev), staged.computed,
                      staged.computed)

    def concat_mask(self, offsets: Any, staged: Staged, dev: Any) -> Any:
        """The mask of the concatenated row from the device ``offsets`` (``cu_seqlens``)."""
        raise NotImplementedError

    def real_logits(self, logits: Any, batch: Batch) -> Any:
        return logits[0]


class Varlen(Concat):
    name = "varlen"
    summary = "cu_seqlens varlen attention, causal (CUDA)"

    def concat_mask(self, offsets: Any, staged: Staged, dev: Any) -> Any:
        return offsets, max(staged.lengths)

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """``mask`` is ``(cu_seqlens, max_seqlen)``; q/k/v (1, H, N, D) become (N, H, D) as
        the varlen APIs take them."""
        cu, max_len = mask
        impl = _varlen_impl()
        assert impl is not None, "varlen attention is not available (checked before the run)"
        name, fn = impl
        q1, k1, v1 = (t[0].transpose(0, 1) for t in (q, k, v))
        if name.startswith("torch"):
            out = fn(q1, k1, v1, cu, cu, max_len, max_len, **_torch_varlen_causal(fn))
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
        if impl[0].startswith("torch") and _torch_varlen_causal(impl[1]) is None:
            return (f"varlen: this torch's {impl[0]} takes neither is_causal nor window_size: "
                    "it cannot run the causal decoder")
        return None


def _torch_varlen_causal(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The keyword that makes ``torch.nn.attention.varlen.varlen_attn`` causal in this torch:
    ``is_causal=True`` (its first form), ``window_size=(-1, 0)`` (later ones, which dropped
    is_causal), or None when it takes neither."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {"is_causal": True}
    if "is_causal" in params:
        return {"is_causal": True}
    if "window_size" in params:
        return {"window_size": (-1, 0)}
    return None


class Flex(Variant):
    name = "flex"
    layout = "flex"
    summary = "FlexAttention + document-and-causal BlockMask"

    def mask(self, t: dict[str, Any], staged: Staged, dev: Any) -> Any:
        from torch.nn.attention.flex_attention import create_block_mask

        doc = t["doc_ids"]

        def causal_document(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

        n = staged.seq_len
        return create_block_mask(causal_document, staged.rows, None, n, n, device=str(dev))

    def attend(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """Inductor's CPU template of flex attention refuses q, k, v that are views of one
        buffer (``chunk`` of the fused projection): they get their own copies there; the CUDA
        template reads the strided views as they are."""
        from torch.nn.attention.flex_attention import flex_attention

        if q.device.type == "cpu":
            q, k, v = (t.contiguous() for t in (q, k, v))
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

    def concat_mask(self, offsets: Any, staged: Staged, dev: Any) -> Any:
        from xformers.ops import fmha

        return fmha.BlockDiagonalCausalMask.from_seqlens(list(staged.lengths), device=dev)

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


