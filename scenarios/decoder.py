"""GPT-style decoder on variable-length sequences: what each padding policy costs on XLA.

The model is the one of "FlashAttention2 and xFormers on PyTorch" (seeds/000): pre-norm blocks
with a fused qkv projection, GELU MLP, learned positions and an LM head. Sequence lengths are
uniform in 1..max-1 (the article's ``randint(1, MAX_SEQ_LEN)``) or drawn from ``--lengths FILE``;
everything is seeded. Padding policies:

* ``max``       pad every batch to the max length: one static shape, about half of it padding
* ``longest``   pad to the longest sequence of the batch: a new shape, so a new XLA graph, for
                almost every batch
* ``pow2``      pad to the next power of two (capped at the max length)
* ``bucket:B1,B2,...``  pad to the smallest listed bucket that fits (the max length is added)
* ``bucket:auto``       buckets from lazyscope's exact advisor on this run's own length stream
* ``packed``    sequences packed best-fit into ``batch`` rows of the max length, attention masked
                by document id inside each row, positions restarting per document: one static
                shape and little padding (the XLA-friendly form of flash-attn varlen / xFormers
                BlockDiagonalMask)

    python scenarios/decoder.py --padding longest --steps 10
    lazyscope trace decoder --padding bucket:auto --batching grouped --steps 40
    lazyscope compare decoder --policies max,longest,pow2,bucket:auto,packed --steps 40

Attention is a pluggable function ``attn(q, k, v, *, mask, causal) -> out`` looked up in
``ATTENTION``. Besides ``sdpa`` / ``sdpa-causal`` / ``math`` (padded layouts, every backend), the
article's padding-free variants run on the eager/compile backends (``LAYOUT`` says how a batch
is laid out for each):

* ``nested``   NestedTensor, jagged layout, with SDPA (one ragged sequence per document)
* ``varlen``   all documents concatenated into one row, ``cu_seqlens``: PyTorch's own
               ``torch.nn.attention.varlen.varlen_attn`` when the installed torch has it, else
               ``flash_attn.flash_attn_varlen_func`` (CUDA)
* ``flex``     FlexAttention with a document (and causal) ``BlockMask`` over the padded batch
* ``xformers`` concatenated documents, ``xformers`` ``BlockDiagonalMask`` (CUDA)

``--sdpa-backend math|flash|efficient|cudnn`` runs SDPA inside ``torch.nn.attention.sdpa_kernel``
(the nanoGPT article's kernel choice); ``--vocab`` overrides the preset's vocabulary (GPT-2's
50257 against the padded 50304). A variant the backend cannot lower (XLA: nested, varlen, flex,
xformers) is refused (exit 2). A variant that is not installed or needs a GPU is *skipped*: the
run ends ``ok`` with zero steps and the note ``skipped: <reason>`` that ``lazyscope report``
shows; nothing is faked.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

# (NamedTuple, not dataclasses: the CLI loads this file without registering it as a module)
from lazyscope.scenario_kit import backend_from_args, base_parser, positive_int, read_lengths


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


# ------------------------------------------------------------------------- argument types


def padding_policy(text: str) -> str:
    """argparse type: max | longest | pow2 | packed | bucket:auto | bucket:B1,B2,..."""
    if text in ("max", "longest", "pow2", "packed", "bucket:auto"):
        return text
    if text.startswith("bucket:"):
        parts = text[len("bucket:"):].split(",")
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"malformed bucket list {text!r}: expected bucket:B1,B2,... with integers"
            ) from None
        if any(v < 1 for v in values):
            raise argparse.ArgumentTypeError(f"bucket sizes must be >= 1 in {text!r}")
        return "bucket:" + ",".join(str(v) for v in sorted(set(values)))
    raise argparse.ArgumentTypeError(
        f"unknown padding policy {text!r}; choose max, longest, pow2, packed, bucket:auto "
        "or bucket:B1,B2,..."
    )


def lengths_file(text: str) -> list[int]:
    """argparse type: a file with one positive integer length per line (blank lines skipped)."""
    try:
        return read_lengths(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=40)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                        help="tiny: 2 layers, dim 128 (CPU); seed: the article's 24 x 1024")
    parser.add_argument("--mode", choices=["train", "eval"], default="train",
                        help="train: causal LM loss, backward, optimizer step; eval: forward")
    parser.add_argument("--padding", type=padding_policy, default="max",
                        help="max | longest | pow2 | bucket:B1,B2,... | bucket:auto | packed")
    parser.add_argument("--batching", choices=["random", "grouped"], default="random",
                        help="random batches, or a length-grouped sampler (sorted pools)")
    parser.add_argument("--attention", choices=sorted(ATTENTION), default="sdpa",
                        help="sdpa: SDPA with the padding/document mask; sdpa-causal: "
                        "is_causal=True (packed rows keep their document mask); math: explicit; "
                        "nested: jagged NestedTensor + SDPA; varlen: cu_seqlens varlen attention; "
                        "flex: FlexAttention + document BlockMask; xformers: BlockDiagonalMask")
    parser.add_argument("--sdpa-backend", choices=SDPA_BACKENDS, default="auto",
                        help="SDPA kernel (torch.nn.attention.sdpa_kernel) for sdpa, sdpa-causal "
                        "and nested on the eager/compile backends")
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


# ------------------------------------------------------------------------------ the data


def length_stream(seed: int, max_len: int, values: list[int] | None) -> Iterator[int]:
    """Seeded lengths: uniform in 1..max_len-1 (the article), or drawn from ``values``."""
    rng = random.Random(seed)
    while True:
        if values:
            yield rng.choice(values)
        else:
            yield rng.randint(1, max(1, max_len - 1))


def plan_batches(stream: Iterator[int], steps: int, batch: int, grouped: bool) -> list[list[int]]:
    """The lengths of every batch of the run. Grouped: pools of 16 batches sorted by length,
    cut into batches, batch order shuffled (a length-grouped sampler)."""
    if not grouped:
        return [[next(stream) for _ in range(batch)] for _ in range(steps)]
    out: list[list[int]] = []
    rng = random.Random(steps * 7919 + batch)
    while len(out) < steps:
        pool = sorted(next(stream) for _ in range(16 * batch))
        chunks = [pool[i:i + batch] for i in range(0, len(pool), batch)]
        rng.shuffle(chunks)
        out += chunks
    return out[:steps]


def padded_length(policy: str, longest: int, max_len: int, buckets: list[int]) -> int:
    if policy == "max":
        return max_len
    if policy == "longest":
        return longest
    if policy == "pow2":
        return min(max_len, 1 << max(0, math.ceil(math.log2(longest))))
    for b in buckets:
        if b >= longest:
            return b
    return max_len


class Batch(NamedTuple):
    """Host tensors for one step: token ids, targets, document ids (-1 = padding), positions."""

    inputs: Any
    targets: Any
    doc_ids: Any
    positions: Any
    lengths: list[int]
    seq_len: int

    @property
    def rows(self) -> int:
        return int(self.inputs.shape[0])


def make_batch(rows: list[list[int]], seq_len: int, vocab: int, gen: Any) -> Batch:
    """Rows of documents (lengths) -> padded tensors; each document gets fresh random tokens."""
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
    return Batch(inputs, targets, doc_ids, positions, lengths, seq_len)


# ----------------------------------------------------------------------------- attention


def attn_sdpa(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """SDPA with an explicit boolean mask (document/padding, causal folded in for training)."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def attn_sdpa_causal(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """SDPA ``is_causal=True``: padding sits at the end so causality hides it; packed rows
    still need their document mask (``mask`` is given then)."""
    import torch.nn.functional as F

    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attn_math(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """nanoGPT's explicit attention: scores, masked_fill(-inf), softmax, weighted sum."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        att = att.masked_fill(~mask, float("-inf"))
    return att.softmax(dim=-1) @ v


def attn_nested(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """SDPA on jagged NestedTensors (B, H, j, D): no padding, no mask; causal in training.

    Off CUDA the only jagged kernel is math, which wants each of q/k/v contiguous in
    (B, j, H, D): the views ``chunk`` made are copied once there."""
    import torch.nn.functional as F

    if q.device.type != "cuda":
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _varlen_impl() -> tuple[str, Callable[..., Any]] | None:
    """PyTorch's own varlen attention when this torch has it, else flash-attn's, else None."""
    import importlib
    import importlib.util

    try:
        mod = importlib.import_module("torch.nn.attention.varlen")
        fn = getattr(mod, "varlen_attn", None)
        if fn is not None:
            return "torch.nn.attention.varlen.varlen_attn", fn
    except ImportError:
        pass
    if importlib.util.find_spec("flash_attn") is not None:
        from flash_attn import flash_attn_varlen_func

        return "flash_attn.flash_attn_varlen_func", flash_attn_varlen_func
    return None


def attn_varlen(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """Varlen attention over one concatenated row: ``mask`` is ``(cu_seqlens, max_seqlen)``;
    q/k/v (1, H, N, D) become (N, H, D) as the varlen APIs take them."""
    cu, max_len = mask
    impl = _varlen_impl()
    assert impl is not None, "varlen attention is not available (checked before the run)"
    name, fn = impl
    q1, k1, v1 = (t[0].transpose(0, 1) for t in (q, k, v))
    if name.startswith("torch"):
        out = fn(q1, k1, v1, cu, cu, max_len, max_len, is_causal=causal)
    else:
        out = fn(q1, k1, v1, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len,
                 max_seqlen_k=max_len, causal=causal)
    return out.transpose(0, 1)[None]


def attn_flex(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """FlexAttention with a document (and, in training, causal) ``BlockMask`` (``mask``)."""
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v, block_mask=mask)


def attn_xformers(q: Any, k: Any, v: Any, *, mask: Any, causal: bool) -> Any:
    """xFormers memory-efficient attention with a ``BlockDiagonalMask`` (``mask``) over one
    concatenated row; xFormers takes (B, M, H, K)."""
    from xformers.ops import memory_efficient_attention

    bias = mask.make_causal() if causal else mask
    q1, k1, v1 = (t.transpose(1, 2) for t in (q, k, v))
    return memory_efficient_attention(q1, k1, v1, attn_bias=bias).transpose(1, 2)


#: name -> (function, needs_mask(packed) -> bool): the boolean (B, 1, L, L) mask of the padded
#: layouts. The padding-free variants build their own mask form (see ``LAYOUT``).
ATTENTION: dict[str, tuple[Callable[..., Any], Callable[[bool], bool]]] = {
    "sdpa": (attn_sdpa, lambda packed: True),
    "sdpa-causal": (attn_sdpa_causal, lambda packed: packed),
    "math": (attn_math, lambda packed: True),
    "nested": (attn_nested, lambda packed: False),
    "varlen": (attn_varlen, lambda packed: False),
    "flex": (attn_flex, lambda packed: False),
    "xformers": (attn_xformers, lambda packed: False),
}

#: how a batch is laid out for each attention: padded (B, L) rows; jagged NestedTensor (one
#: sequence per document); concat: every document in one (1, N) row; flex: padded + BlockMask
LAYOUT: dict[str, str] = {"sdpa": "padded", "sdpa-causal": "padded", "math": "padded",
                          "nested": "jagged", "varlen": "concat", "flex": "flex",
                          "xformers": "concat"}

SDPA_BACKENDS = ["auto", "math", "flash", "efficient", "cudnn"]
_SDPA_ENUM = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION"}


def build_mask(doc_ids: Any, causal: bool) -> Any:
    """(B, 1, L, L) bool: same document (padding, id -1, attends to padding), and causal."""
    import torch

    mask = doc_ids[:, :, None] == doc_ids[:, None, :]
    if causal:
        n = doc_ids.shape[1]
        tril = torch.ones((n, n), dtype=torch.bool, device=doc_ids.device).tril()
        mask = mask & tril[None]
    return mask[:, None]


# ------------------------------------------------------- which variant runs where, and why not


def refusal(attention: str, backend_name: str, sdpa_backend: str, autocast: str) -> str | None:
    """Why this combination can never run (bad input, exit 2), or None."""
    if backend_name == "xla":
        if LAYOUT[attention] != "padded":
            return (f"--attention {attention} is not lowered by torch_xla; on --backend xla use "
                    "sdpa, sdpa-causal or math (--padding packed gives the document mask), or run "
                    f"{attention} with --backend eager|compile")
        if sdpa_backend != "auto":
            return ("--sdpa-backend picks a PyTorch SDPA kernel (eager/compile backends); "
                    "torch_xla lowers SDPA itself: leave it auto on --backend xla")
        if autocast != "none":
            return "--autocast is for the eager/compile backends"
    if sdpa_backend != "auto" and attention not in ("sdpa", "sdpa-causal", "nested"):
        return f"--sdpa-backend applies to sdpa, sdpa-causal and nested, not to {attention}"
    return None


def skip_reason(attention: str, device: str, train: bool, packed: bool, sdpa_backend: str,
                dtype: Any) -> str | None:
    """Why this variant cannot run on this machine (not installed, needs a GPU), or None."""
    import importlib.util

    import torch

    where = f"this run is on {device}"
    if attention == "nested" and train and device != "cuda":
        return (f"nested: training needs causal jagged-NestedTensor SDPA, and torch "
                f"{torch.__version__}'s only jagged SDPA kernel off CUDA (math) rejects "
                "is_causal=True; --mode eval runs on the CPU, training needs a CUDA GPU")
    if attention == "varlen":
        impl = _varlen_impl()
        if impl is None:
            return (f"varlen: torch {torch.__version__} has no torch.nn.attention.varlen and "
                    "flash-attn is not installed (pip install flash-attn; it needs a CUDA GPU)")
        if device != "cuda":
            return f"varlen: {impl[0]} needs a CUDA device ({where})"
    if attention == "xformers":
        if importlib.util.find_spec("xformers") is None:
            return ("xformers: xformers is not installed (pip install xformers; its "
                    "BlockDiagonalMask attention needs a CUDA GPU)")
        if device != "cuda":
            return f"xformers: memory_efficient_attention with BlockDiagonalMask needs CUDA ({where})"
    if attention == "flex" and importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
        return f"flex: torch {torch.__version__} has no torch.nn.attention.flex_attention"
    if sdpa_backend != "auto":
        return _probe_sdpa_kernel(attention, device, train, packed, sdpa_backend, dtype)
    return None


def _probe_sdpa_kernel(attention: str, device: str, train: bool, packed: bool, name: str,
                       dtype: Any) -> str | None:
    """Run one tiny SDPA call of the same form (mask / is_causal / jagged) under the chosen
    kernel: torch raises when that kernel cannot take these inputs on this device."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    enum = getattr(SDPBackend, _SDPA_ENUM[name], None)
    if enum is None:
        return f"--sdpa-backend {name}: torch {torch.__version__} has no SDPBackend.{_SDPA_ENUM[name]}"
    q = torch.randn(2, 4, 8, 16, device=device, dtype=dtype)
    try:
        with warnings.catch_warnings(), sdpa_kernel([enum]):
            warnings.simplefilter("ignore")
            if attention == "nested":
                nt = torch.nested.nested_tensor([q[0, :, :5].transpose(0, 1), q[1].transpose(0, 1)],
                                                layout=torch.jagged).transpose(1, 2)
                F.scaled_dot_product_attention(nt, nt, nt, is_causal=train)
            elif attention == "sdpa-causal" and not packed:
                F.scaled_dot_product_attention(q, q, q, is_causal=True)
            else:
                mask = torch.ones(2, 1, 8, 8, dtype=torch.bool, device=device).tril()
                F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    except RuntimeError as err:
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
        return (f"--sdpa-backend {name}: no usable {name} SDPA kernel on {device} for "
                f"{attention}'s inputs ({dtype}): torch says: {first[:200]}")
    return None


def sdpa_context(name: str) -> Any:
    """``sdpa_kernel([SDPBackend.X])`` for a chosen kernel, else a no-op context."""
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, _SDPA_ENUM[name])])


def add_note(text: str) -> None:
    """Append a line to the run's ``meta.info["notes"]`` (``lazyscope report`` shows each)."""
    from lazyscope.backends import active_recorder, set_run_info

    rec = active_recorder()
    notes = list((rec.writer.meta.info.get("notes") or []) if rec and rec.writer else [])
    if text not in notes:
        set_run_info(notes=[*notes, text])


class Inputs(NamedTuple):
    """One step's device tensors in the attention variant's layout."""

    inputs: Any
    positions: Any
    targets: Any  # flat (N,) targets for the loss
    mask: Any
    seq_len: int  # the length the step computes over (padded length, or the concat row)
    computed: int  # tokens computed


def layout_batch(batch: Batch, attention: str, dev: Any, train: bool, needs_mask: bool) -> Inputs:
    """Host batch -> device tensors: padded rows, a jagged NestedTensor, one concatenated row
    with ``cu_seqlens``, or padded rows with a FlexAttention ``BlockMask``."""
    import torch

    layout = LAYOUT[attention]
    if layout in ("padded", "flex"):
        inputs, positions = batch.inputs.to(dev), batch.positions.to(dev)
        targets = batch.targets.to(dev).reshape(-1)
        mask = None
        if layout == "flex":
            from torch.nn.attention.flex_attention import create_block_mask

            doc = batch.doc_ids.to(dev)

            def document(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
                return doc[b, q_idx] == doc[b, kv_idx]

            def causal_document(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
                return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

            n = batch.seq_len
            mask = create_block_mask(causal_document if train else document, batch.rows, None,
                                     n, n, device=str(dev))
        elif needs_mask:
            mask = build_mask(batch.doc_ids.to(dev), train)
        return Inputs(inputs, positions, targets, mask, batch.seq_len, batch.rows * batch.seq_len)
    real = batch.doc_ids >= 0  # row-major: the documents in make_batch's order
    values, pos, tgt = batch.inputs[real], batch.positions[real], batch.targets[real]
    lengths = torch.tensor(batch.lengths, dtype=torch.int32)
    offsets = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    total = int(values.shape[0])
    if layout == "jagged":
        off = offsets.to(dev, torch.long)
        inputs = torch.nested.nested_tensor_from_jagged(values.to(dev), off)
        positions = torch.nested.nested_tensor_from_jagged(pos.to(dev), off)
        return Inputs(inputs, positions, tgt.to(dev), None, max(batch.lengths), total)
    mask: Any
    if attention == "xformers":
        from xformers.ops import fmha

        mask = fmha.BlockDiagonalMask.from_seqlens(list(batch.lengths), device=dev)
    else:
        mask = (offsets.to(dev), max(batch.lengths))
    return Inputs(values[None].to(dev), pos[None].to(dev), tgt.to(dev), mask, total, total)


# --------------------------------------------------------------------------------- model


def build_model(p: Preset, attn_fn: Callable[..., Any], graph_break: bool = False) -> Any:
    import torch
    from torch import nn

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

        def forward(self, x_in: torch.Tensor, mask: Any, causal: bool) -> torch.Tensor:
            # (b, -1, ...) rather than (b, n, ...): a jagged NestedTensor's n is ragged
            b = x_in.shape[0]
            q, k, v = self.qkv(self.norm1(x_in)).chunk(3, -1)
            q, k, v = (t.view(b, -1, self.heads, self.head_dim).transpose(1, 2)
                       for t in (q, k, v))
            x = attn_fn(q, k, v, mask=mask, causal=causal)
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

        def forward(self, inputs: torch.Tensor, positions: torch.Tensor, mask: Any,
                    causal: bool) -> torch.Tensor:
            x = self.embedding(inputs) + self.positional_embedding(positions)
            if graph_break:
                torch._dynamo.graph_break()  # planted graph break (--graph-break)
            for blk in self.blocks:
                x = blk(x, mask, causal)
            return self.output(self.norm(x))

    return Decoder()


def n_params(model: Any) -> int:
    return sum(t.numel() for t in model.parameters())


# ---------------------------------------------------------------------------------- main


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    p = resolve(args)
    import torch

    from lazyscope.analyze.buckets import Packer, advise, cost_model_from_info
    from lazyscope.errors import UsageError

    refused = refusal(args.attention, args.backend, args.sdpa_backend, args.autocast)
    if refused is not None:
        raise UsageError(refused)
    from lazyscope.backends import annotate_step, set_run_info

    backend = backend_from_args(args)
    dev = backend.device()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    stream = length_stream(args.seed, p.max_len, args.lengths)
    grouped = args.batching == "grouped"
    packed = args.padding == "packed"

    buckets: list[int] = []
    advice: dict[str, Any] | None = None
    planned: list[list[int]] = []
    if not packed:
        planned = plan_batches(stream, args.steps, p.batch, grouped)
    if args.padding == "bucket:auto":
        flat = [n for b in planned for n in b]
        base = cost_model_from_info(p._asdict())
        from lazyscope.analyze.buckets import COMPILE_PRIOR_STEPS, CostModel

        prior = CostModel(crossover=base.crossover,
                          compile_s=COMPILE_PRIOR_STEPS * p.batch * base.row(p.max_len))
        advice = advise(flat, batch=p.batch, top=p.max_len, max_buckets=args.max_buckets,
                        grouped=grouped, horizon=args.horizon or args.steps, model=prior)
        buckets = list(advice["best"]["boundaries"])
    elif args.padding.startswith("bucket:"):
        buckets = sorted({min(int(b), p.max_len) for b in args.padding[7:].split(",")} | {p.max_len})
    elif args.padding == "pow2":
        buckets = sorted({min(p.max_len, 1 << max(0, math.ceil(math.log2(n))))
                          for n in range(1, p.max_len + 1)})
    elif args.padding == "max":
        buckets = [p.max_len]

    attn_fn, needs_mask = ATTENTION[args.attention]
    train = args.mode == "train"
    layout = LAYOUT[args.attention]
    info = dict(
        scenario="decoder", preset=args.preset, policy=args.padding, batching=args.batching,
        mode=args.mode, attention=args.attention, layout=layout, sdpa_backend=args.sdpa_backend,
        autocast=args.autocast, optimizer=args.optimizer, buckets=buckets,
        graph_break=args.graph_break,
        dim=p.dim, layers=p.layers, heads=p.heads, vocab=p.vocab, max_len=p.max_len,
        batch=p.batch, seed=args.seed, lengths_source="file" if args.lengths else "uniform",
        advice_k=advice["best"]["buckets"] if advice else None,
    )
    dtype = torch.bfloat16 if args.autocast == "bf16" else torch.float32
    reason = skip_reason(args.attention, dev.type, train, packed, args.sdpa_backend, dtype)
    if reason is not None:
        # not installed / needs a GPU: an ok run with zero steps and the reason, never faked
        set_run_info(**info, skipped=reason)
        add_note(f"skipped: {reason}")
        print(f"decoder {args.preset} {args.mode} attention={args.attention}: skipped: {reason}")
        return 0
    if args.attention == "flex" and getattr(backend, "name", "") != "compile":
        add_note("flex: flex_attention outside torch.compile runs PyTorch's unfused reference "
                 "implementation (it materialises the full score matrix); --backend compile "
                 "generates the fused kernel")
    model = build_model(p, attn_fn, args.graph_break).to(dev)
    model = backend.prepare_model(model)
    model.train(train)
    opt: Any = None
    if train:
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if args.optimizer == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4))
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_TARGET)
    set_run_info(**info, params=n_params(model))
    packer = Packer(stream, p.batch, p.max_len) if packed else None

    def forward_loss(x: Inputs, causal: bool) -> Any:
        amp = (torch.autocast(dev.type, dtype=torch.bfloat16) if args.autocast == "bf16"
               else contextlib.nullcontext())
        with amp, sdpa_context(args.sdpa_backend):
            logits = model(x.inputs, x.positions, x.mask, causal)
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
        batch = make_batch(rows, seq_len, p.vocab, gen)
        real = sum(batch.lengths)
        computed = batch.rows * seq_len if layout in ("padded", "flex") else real
        real_total += real
        computed_total += computed
        annotate_step(real_tokens=real, computed_tokens=computed,
                      seq_len=seq_len if layout in ("padded", "flex") else real,
                      batch_max_len=max(batch.lengths), rows=batch.rows, lengths=batch.lengths)
        with backend.step(i, "train_step" if train else "eval_step"):
            x = layout_batch(batch, args.attention, dev, train, needs_mask(packed))
            if train:
                with backend.region("forward"):
                    loss = forward_loss(x, True)
                with backend.region("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                with backend.region("optimizer"):
                    opt.step()
            else:
                with torch.no_grad(), backend.region("forward"):
                    loss = forward_loss(x, False)
    final = float(loss.item()) if loss is not None else float("nan")  # waits for the device
    wall = time.perf_counter() - t0
    print(
        f"decoder {args.preset} {args.mode} padding={args.padding} batching={args.batching} "
        f"attention={args.attention}: {args.steps} steps in {wall:.1f} s, "
        f"{real_total / wall:.0f} real tokens/s, padding efficiency "
        f"{real_total / max(1, computed_total):.2f}, buckets {buckets or '-'}, loss {final:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
