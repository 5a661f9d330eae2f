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
``ATTENTION``; another backend can register more (nested/jagged, varlen, FlexAttention).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
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
                        "is_causal=True (packed rows keep their document mask); math: explicit")
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


#: name -> (function, needs_mask(packed) -> bool). Register CUDA-only variants here.
ATTENTION: dict[str, tuple[Callable[..., Any], Callable[[bool], bool]]] = {
    "sdpa": (attn_sdpa, lambda packed: True),
    "sdpa-causal": (attn_sdpa_causal, lambda packed: packed),
    "math": (attn_math, lambda packed: True),
}


def build_mask(doc_ids: Any, causal: bool) -> Any:
    """(B, 1, L, L) bool: same document (padding, id -1, attends to padding), and causal."""
    import torch

    mask = doc_ids[:, :, None] == doc_ids[:, None, :]
    if causal:
        n = doc_ids.shape[1]
        tril = torch.ones((n, n), dtype=torch.bool, device=doc_ids.device).tril()
        mask = mask & tril[None]
    return mask[:, None]


# --------------------------------------------------------------------------------- model


def build_model(p: Preset, attn_fn: Callable[..., Any]) -> Any:
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
            b, n, _ = x_in.shape
            q, k, v = self.qkv(self.norm1(x_in)).chunk(3, -1)
            q, k, v = (t.view(b, n, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
            x = attn_fn(q, k, v, mask=mask, causal=causal)
            x = x_in + self.proj(x.transpose(1, 2).reshape(b, n, p.dim))
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
            for blk in self.blocks:
                x = blk(x, mask, causal)
            return self.output(self.norm(x))

    return Decoder()


def n_params(model: Any) -> int:
    return sum(t.numel() for t in model.parameters())


# ---------------------------------------------------------------------------------- main


def resolve(args: argparse.Namespace) -> Preset:
    p = PRESETS[args.preset]
    if args.batch or args.max_len:
        p = Preset(p.dim, p.layers, p.heads, p.vocab, args.max_len or p.max_len,
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
    model = build_model(p, attn_fn).to(dev)
    model = backend.prepare_model(model)
    train = args.mode == "train"
    model.train(train)
    opt: Any = None
    if train:
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if args.optimizer == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4))
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_TARGET)
    set_run_info(
        scenario="decoder", preset=args.preset, policy=args.padding, batching=args.batching,
        mode=args.mode, attention=args.attention, optimizer=args.optimizer, buckets=buckets,
        dim=p.dim, layers=p.layers, heads=p.heads, vocab=p.vocab, max_len=p.max_len,
        batch=p.batch, params=n_params(model), seed=args.seed,
        lengths_source="file" if args.lengths else "uniform",
        advice_k=advice["best"]["buckets"] if advice else None,
    )
    packer = Packer(stream, p.batch, p.max_len) if packed else None

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
        computed = batch.rows * seq_len
        real_total += real
        computed_total += computed
        annotate_step(real_tokens=real, computed_tokens=computed, seq_len=seq_len,
                      batch_max_len=max(batch.lengths), rows=batch.rows, lengths=batch.lengths)
        with backend.step(i, "train_step" if train else "eval_step"):
            inputs = batch.inputs.to(dev)
            targets = batch.targets.to(dev)
            positions = batch.positions.to(dev)
            mask = build_mask(batch.doc_ids.to(dev), train) if needs_mask(packed) else None
            if train:
                with backend.region("forward"):
                    logits = model(inputs, positions, mask, True)
                    loss = criterion(logits.view(-1, p.vocab), targets.view(-1))
                with backend.region("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                with backend.region("optimizer"):
                    opt.step()
            else:
                with torch.no_grad(), backend.region("forward"):
                    logits = model(inputs, positions, mask, False)
                    loss = criterion(logits.view(-1, p.vocab), targets.view(-1))
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
