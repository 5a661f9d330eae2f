"""Hugging Face GPT-2 (transformers, built from code) on variable-length sequences.

A real ``transformers.GPT2LMHeadModel``, built from a ``GPT2Config`` (no weights are downloaded),
fed the way Hugging Face training code feeds it: padded batches with an ``attention_mask`` and
``labels`` (-100 on padding; the model shifts them itself), or padding-free packed rows with
``position_ids`` restarting at each document (transformers' ``DataCollatorWithFlattening``).
Sequence lengths are uniform in 1..max-1 or drawn from ``--lengths FILE``; everything is seeded.
The padding policies are the ``decoder`` scenario's (``lazyscope.core.padding``, shared with the bucket
advisor), so ``lazyscope compare`` and ``lazyscope advise`` read both alike:

* ``max``       pad every batch to the max length: one static shape
* ``longest``   pad to the batch's longest sequence: a new shape (an XLA graph) per new length
* ``pow2``      pad to the next power of two from 16 (capped at the max length)
* ``bucket:B1,B2,...``  pad to the smallest listed bucket that fits (the max length is added)
* ``bucket:auto``       buckets from lazyscope's advisor on this run's own length stream
* ``packed``    sequences packed best-fit into ``batch`` rows of the max length, no
                ``attention_mask``, ``position_ids`` restarting per document (the tail of a row
                that is not full is one more "document" of padding, labels -100). Whether
                GPT-2 then keeps documents apart depends on transformers: one whose mask code
                has ``masking_utils.find_packed_sequence_indices`` (5.23 was checked) finds the
                documents in the restarting ``position_ids`` and builds a document-and-causal
                mask for sdpa (with no ``attention_mask`` and no KV cache only); older ones mask
                causally only, so a token attends to the earlier documents of its row. The run
                checks which (one tiny forward on the CPU) and says so in its notes.

    python -m lazyscope_scenarios.hf_gpt2 --padding longest --steps 10
    lazyscope trace --steps 20 hf-gpt2 --padding packed
    lazyscope compare --policies max,longest,bucket:auto,packed --steps 20 hf-gpt2

Needs ``transformers`` (``pip install 'lazyscope[hf]'``); without it the run stops with one line
(exit 4 under ``lazyscope trace``). Attention is transformers' ``sdpa`` implementation (``eager``
if the installed GPT-2 has none, with a note).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from typing import Any, NamedTuple

# NamedTuple and plain classes, not dataclasses: the CLI loads this file by path without
# registering it in sys.modules, and a dataclass defined in such a module fails to build.
import lazyscope
from lazyscope.core.padding import padding_policy
from lazyscope_scenarios.kit import (
    add_loader_arguments,
    base_parser,
    lengths_file,
    n_params,
    padding_plan,
    policy_info,
    positive_int,
    run_length_steps,
    runtime_from_args,
    steps_line,
)

SCENARIO = "hf-gpt2"
INSTALL_HINT = "hf-gpt2 needs transformers: pip install 'lazyscope[hf]'"
IGNORE_INDEX = -100  # transformers' (and cross-entropy's) ignored label
PAD_ID = 0  # the token id padding holds (real tokens are drawn from 1..vocab-1)


class Preset(NamedTuple):
    dim: int  # n_embd
    layers: int  # n_layer
    heads: int  # n_head
    vocab: int  # vocab_size
    max_len: int  # n_positions, the pad-to-max length and the packed row length
    batch: int  # rows per step


PRESETS: dict[str, Preset] = {
    "tiny": Preset(dim=64, layers=2, heads=4, vocab=1024, max_len=128, batch=8),
    "small": Preset(dim=128, layers=4, heads=4, vocab=1024, max_len=256, batch=8),
    # the reference article's GPT-2 (seeds/000): 24 layers, n_embd 1024, 16 heads, its
    # vocabulary of 1024, lengths up to 1024, batch 32 (a GPU's size)
    "seed": Preset(dim=1024, layers=24, heads=16, vocab=1024, max_len=1024, batch=32),
}
ATTENTION = ["sdpa", "eager", "flash_attention_2"]


# ------------------------------------------------------------------------------ the data


class HFBatch(NamedTuple):
    """Host tensors for one step, in the form transformers takes them.

    ``input_ids``, ``labels`` (= input ids, -100 on padding and, in packed rows, on each
    document's first token so that no document predicts the next one), ``attention_mask``
    (1 real, 0 padding; None for packed rows), ``position_ids`` (restarting at 0 in each
    document; the model gets them for packed rows only), ``doc_ids`` (document index in its row,
    -1 on padding)."""

    input_ids: Any
    labels: Any
    attention_mask: Any
    position_ids: Any
    doc_ids: Any
    lengths: list[int]
    seq_len: int
    packed: bool = False

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])


def make_batch(rows: list[list[int]], seq_len: int, vocab: int, gen: Any,
               packed: bool = False) -> HFBatch:
    """Rows of documents (their lengths) -> an :class:`HFBatch` of ``len(rows)`` rows of
    ``seq_len`` tokens; each document gets fresh random tokens from ``gen``, laid out by
    :func:`lazyscope.data.layout_rows` (the collators' layout).

    Padded (``packed=False``): one document per row, right padding, an attention mask.
    Packed: documents back to back, ``position_ids`` restarting at each one, and the tail of a
    row that is not full gets positions 0, 1, ... too (a padding "document" of its own, labels
    -100), as a flattening collator would give it; no attention mask."""
    import torch

    from lazyscope.data import layout_rows

    for r, docs in enumerate(rows):
        if not packed and len(docs) != 1:
            raise ValueError(f"a padded row holds one document, row {r} holds {len(docs)}")
    tokens = [[torch.randint(1, vocab, (n,), generator=gen) for n in row] for row in rows]
    out = layout_rows(tokens, seq_len, pad_id=PAD_ID, label_pad_id=IGNORE_INDEX, packed=packed)
    return to_batch(out, [n for row in rows for n in row], packed)


def to_batch(collated: dict[str, Any], lengths: list[int], packed: bool) -> HFBatch:
    """A :mod:`lazyscope.data` collator's output (``document_ids`` included) as an
    :class:`HFBatch`."""
    doc_ids = collated["document_ids"]
    attention_mask = None if packed else (doc_ids >= 0).long()
    return HFBatch(collated["input_ids"], collated["labels"], attention_mask,
                   collated["position_ids"], doc_ids, lengths, int(doc_ids.shape[1]), packed)


def model_inputs(batch: HFBatch, dev: Any) -> dict[str, Any]:
    """The keyword arguments of ``model(**...)`` on device ``dev`` (no KV cache: with one,
    transformers would not look for documents in the position ids)."""
    out: dict[str, Any] = {"input_ids": batch.input_ids.to(dev, non_blocking=True),
                           "labels": batch.labels.to(dev, non_blocking=True),
                           "use_cache": False}
    if batch.packed:
        out["position_ids"] = batch.position_ids.to(dev, non_blocking=True)
    else:
        out["attention_mask"] = batch.attention_mask.to(dev, non_blocking=True)
    return out


# --------------------------------------------------------------------------------- model


def gpt2_config(p: Preset, attn: str) -> Any:
    from transformers import GPT2Config

    return GPT2Config(n_layer=p.layers, n_embd=p.dim, n_head=p.heads, vocab_size=p.vocab,
                      n_positions=p.max_len, bos_token_id=None, eos_token_id=None,
                      attn_implementation=attn)


def build_model(p: Preset, attn: str = "sdpa") -> tuple[Any, str]:
    """``GPT2LMHeadModel(GPT2Config(...))`` with ``attn`` attention if this transformers has it,
    else eager: ``(model, the implementation it uses)``."""
    from transformers import GPT2LMHeadModel

    try:
        model = GPT2LMHeadModel(gpt2_config(p, attn))
    except (ValueError, ImportError, NotImplementedError):
        if attn == "eager":
            raise
        return build_model(p, "eager")
    # the LM loss by name: transformers 5 warns when it has to guess it
    model.loss_type = "ForCausalLM"
    used = getattr(model.config, "_attn_implementation", None) or "eager"
    return model, used


def document_mask_honoured(attn: str) -> bool:
    """Does this transformers' GPT-2 keep the documents of a packed row apart when given
    restarting ``position_ids`` and no attention mask? One tiny forward on the CPU: the
    logits of the row's second document must equal those of that document alone."""
    import torch

    tiny = Preset(dim=32, layers=1, heads=2, vocab=16, max_len=8, batch=1)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model, _ = build_model(tiny, attn)
        model.eval()
        ids = torch.tensor([[3, 5, 7, 2, 9]])
        together = model(input_ids=ids, position_ids=torch.tensor([[0, 1, 2, 0, 1]]),
                         use_cache=False).logits[0, 3:]
        alone = model(input_ids=ids[:, 3:], position_ids=torch.tensor([[0, 1]]),
                      use_cache=False).logits[0]
    return bool(torch.allclose(together, alone, atol=1e-5))


# ------------------------------------------------------------------------------ arguments


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=20)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                        help="tiny: 2 layers, n_embd 64, 4 heads, max length 128; small: 4 "
                        "layers, n_embd 128, 4 heads, max length 256 (vocabulary 1024, batch 8)")
    parser.add_argument("--mode", choices=["train", "eval"], default="train",
                        help="train: the model's LM loss on labels, backward, optimizer step; "
                        "eval: forward and loss under no_grad")
    parser.add_argument("--padding", type=padding_policy, default="max",
                        help="max | longest | pow2 | bucket:B1,B2,... | bucket:auto | packed | "
                        "packed:ROWSxLEN | auto (what `lazyscope advise` recommends for this "
                        "run's own lengths)")
    parser.add_argument("--batching", choices=["random", "grouped"], default="random",
                        help="random batches, or a length-grouped sampler (sorted pools)")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    add_loader_arguments(parser)
    parser.add_argument("--attention", choices=ATTENTION, default="sdpa",
                        help="transformers' attn_implementation (flash_attention_2 needs the "
                        "flash-attn package and a GPU; the run is skipped without them)")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: torch.autocast around forward and loss (the article's "
                        "setting on the GPU; eager/compile backends)")
    parser.add_argument("--lengths", type=lengths_file, default=None, metavar="FILE",
                        help="draw lengths from this file (one per line) instead of uniform")
    parser.add_argument("--batch", type=positive_int, default=None,
                        help="rows per step (default: the preset's: 8, 32 for seed)")
    parser.add_argument("--max-len", type=positive_int, default=None,
                        help="max length: n_positions, pad-to-max and packed row length "
                        "(default: the preset's, 128 for tiny)")
    parser.add_argument("--max-buckets", type=positive_int, default=8,
                        help="K limit for bucket:auto and auto")
    parser.add_argument("--horizon", type=positive_int, default=None,
                        help="steps auto and bucket:auto plan for (default --steps)")
    return parser


def resolve(args: argparse.Namespace) -> Preset:
    p = PRESETS[args.preset]
    return p._replace(max_len=args.max_len or p.max_len, batch=args.batch or p.batch)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments (the CLI calls this before anything runs); imports
    neither torch nor transformers."""
    parser = build_parser()
    args = parser.parse_args(argv)
    p = resolve(args)
    if p.max_len < 2:
        parser.error(f"--max-len must be at least 2, got {p.max_len}")
    if p.dim % p.heads:
        parser.error(f"n_embd {p.dim} is not a multiple of n_head {p.heads}")
    if args.lengths and max(args.lengths) > p.max_len:
        parser.error(f"--lengths holds length {max(args.lengths)} > max length {p.max_len}")
    return args


# ---------------------------------------------------------------------------------- main


def packed_note(honoured: bool, attn: str, version: str) -> str:
    if honoured:
        return (f"packed: transformers {version} GPT2 ({attn}) finds the documents in the "
                "restarting position_ids (no attention_mask, no cache) and masks attention "
                "per document and causally")
    return f"packed: GPT2 with {attn} attends across documents in a row: the mask is causal only"


def import_transformers() -> Any:
    """``transformers``, or MissingDependencyError (exit 4 under the CLI) with the install hint;
    an installed transformers that fails to import says why."""
    try:
        import transformers
    except ImportError as err:
        from lazyscope.core.errors import MissingDependencyError

        if isinstance(err, ModuleNotFoundError) and err.name == "transformers":
            raise MissingDependencyError(INSTALL_HINT) from None
        first = next((ln for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
        raise MissingDependencyError(f"hf-gpt2 cannot import transformers: {first}") from None
    return transformers


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    transformers = import_transformers()
    p = resolve(args)
    import torch

    runtime = runtime_from_args(args)
    dev = runtime.device()
    from lazyscope.data import collate_for

    train = args.mode == "train"

    if args.autocast != "none" and args.backend == "xla":
        from lazyscope.core.errors import UsageError

        raise UsageError("--autocast is for the eager/compile backends")
    torch.manual_seed(args.seed)
    model, attn = build_model(p, args.attention)
    if attn != args.attention:
        why = (f"transformers {transformers.__version__} GPT2 cannot use "
               f"attn_implementation={args.attention!r} here")
        if args.attention == "flash_attention_2":
            # not installed / no GPU: an ok run with zero steps, never faked
            reason = f"{why} (pip install flash-attn; it needs a CUDA GPU)"
            lazyscope.set_info(scenario=SCENARIO, preset=args.preset, mode=args.mode,
                               attention=args.attention, skipped=reason)
            lazyscope.note(f"skipped: {reason}")
            print(f"hf-gpt2 {args.preset} {args.mode} attention={args.attention}: skipped: "
                  f"{reason}")
            return 0
        lazyscope.note(f"{why}: it runs {attn} attention")
    may_pack = args.padding == "auto" or args.padding.startswith("packed")
    honoured = document_mask_honoured(attn) if may_pack else None
    # auto packs only when this transformers keeps the documents of a packed row apart
    plan = padding_plan(args, max_len=p.max_len, batch=p.batch, dims=p._asdict(),
                        packing=bool(honoured))
    policy = plan.policy
    packed = policy.packed
    collate = collate_for(policy, rows=p.batch, pad_id=PAD_ID, return_document_ids=True,
                          **({"max_position": p.max_len} if packed else {}))
    if packed:
        lazyscope.note(packed_note(bool(honoured), attn, transformers.__version__))
    elif args.padding == "auto" and not honoured:
        lazyscope.note(packed_note(False, attn, transformers.__version__)
                       + ": auto does not consider packing")
    params = n_params(model)
    model = runtime.prepare_model(model.to(dev))
    model.train(train)
    opt: Any = None
    if train:
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if args.optimizer == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4))
    lazyscope.set_info(
        scenario=SCENARIO, preset=args.preset, policy=args.padding,
        mode=args.mode, attention=attn, attn_implementation=attn, causal=True,
        optimizer=args.optimizer, autocast=args.autocast, dim=p.dim, layers=p.layers, heads=p.heads,
        vocab=p.vocab, max_len=p.max_len, batch=p.batch, seed=args.seed,
        lengths_source="file" if args.lengths else "uniform", params=params,
        transformers=transformers.__version__, document_mask=honoured, **policy_info(plan),
    )

    def forward_loss(x: Any) -> Any:
        amp = (torch.autocast(dev.type, dtype=torch.bfloat16) if args.autocast == "bf16"
               else contextlib.nullcontext())
        with amp:
            return model(**x).loss

    run = run_length_steps(args, runtime, plan, vocab=p.vocab, rows=p.batch,
                           row_len=p.max_len, collate=collate, to_batch=to_batch,
                           inputs=lambda batch: model_inputs(batch, dev),
                           forward=forward_loss, opt=opt)
    print(steps_line("hf-gpt2", args, policy, run, f"{attn} backend={runtime.name}"))
    return 0


def _standalone() -> int:
    """``python hf_gpt2.py``: a lazyscope error is one line and its exit code; traced, it
    propagates (the CLI reports it and keeps the code)."""
    from lazyscope.core.errors import LazyscopeError

    if lazyscope.tracing() is not None:
        return main()
    try:
        return main()
    except LazyscopeError as err:
        print(f"lazyscope: {err}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(_standalone())
