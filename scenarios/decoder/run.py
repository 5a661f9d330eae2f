"""The decoder scenario's command line and main loop."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

import lazyscope
from lazyscope.core.padding import padding_policy
from lazyscope_scenarios.decoder.data import PAD_TARGET, Inputs, to_batch
from lazyscope_scenarios.decoder.model import (
    PRESETS,
    SDPA_BACKENDS,
    VARIANTS,
    Preset,
    _names,
    build_model,
    sdpa_context,
)
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

# ------------------------------------------------------------------------------ arguments


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=40)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                        help="tiny: 2 layers, dim 128 (CPU); seed: the article's 24 x 1024")
    parser.add_argument("--mode", choices=["train", "eval"], default="train",
                        help="train: causal LM loss, backward, optimizer step; eval: forward "
                        "(the same causal attention)")
    parser.add_argument("--padding", type=padding_policy, default="max",
                        help="max | longest | pow2 | bucket:B1,B2,... | bucket:auto | packed | "
                        "packed:ROWSxLEN | auto (what `lazyscope advise` recommends for this "
                        "run's own lengths)")
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
    parser.add_argument("--fused-optimizer", action="store_true",
                        help="the optimizer's fused=True implementation (one kernel per update "
                        "on CUDA) instead of its default (foreach)")
    add_loader_arguments(parser)
    parser.add_argument("--lengths", type=lengths_file, default=None, metavar="FILE",
                        help="draw lengths from this file (one per line) instead of uniform")
    parser.add_argument("--batch", type=positive_int, default=None, help="override the preset")
    parser.add_argument("--max-len", type=positive_int, default=None,
                        help="override the preset's max length (positions, pad-to-max)")
    parser.add_argument("--max-buckets", type=positive_int, default=8,
                        help="K limit for bucket:auto and auto")
    parser.add_argument("--horizon", type=positive_int, default=None,
                        help="steps auto and bucket:auto plan for (default --steps): a long "
                        "horizon amortises more compilations, so it can pick more buckets")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    p = resolve(args)
    variant = VARIANTS[args.attention]
    refused = variant.refusal(args.backend, args.sdpa_backend, args.autocast)
    if refused is not None:
        from lazyscope.core.errors import UsageError

        raise UsageError(refused)
    import torch

    runtime = runtime_from_args(args)
    dev = runtime.device()
    from lazyscope.data import collate_for

    plan = padding_plan(args, max_len=p.max_len, batch=p.batch, dims=p._asdict())
    policy = plan.policy
    packed = policy.packed
    collate = collate_for(policy, rows=p.batch, return_document_ids=True,
                          **({"max_position": p.max_len} if packed else {}))
    train = args.mode == "train"
    info = dict(
        scenario="decoder", preset=args.preset, policy=args.padding,
        mode=args.mode, attention=variant.name, layout=variant.layout, causal=True,
        sdpa_backend=args.sdpa_backend, autocast=args.autocast, optimizer=args.optimizer,
        fused_optimizer=args.fused_optimizer, workers=args.workers,
        graph_break=args.graph_break,
        dim=p.dim, layers=p.layers, heads=p.heads, vocab=p.vocab, max_len=p.max_len,
        batch=p.batch, seed=args.seed, lengths_source="file" if args.lengths else "uniform",
        **policy_info(plan),
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
        # fused: one kernel for the whole update (CUDA), where the default is foreach's
        fused = {"fused": True} if args.fused_optimizer else {}
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3, **fused) if args.optimizer == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4, **fused))
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_TARGET)
    lazyscope.set_info(**info, params=n_params(model))

    def forward_loss(x: Inputs) -> Any:
        amp = (torch.autocast(dev.type, dtype=torch.bfloat16) if args.autocast == "bf16"
               else contextlib.nullcontext())
        with amp, sdpa_context(args.sdpa_backend):
            logits = model(x.inputs, x.positions, x.mask)
            flat = logits.values() if logits.is_nested else logits.reshape(-1, p.vocab)
            return criterion(flat.float(), x.targets)

    run = run_length_steps(args, runtime, plan, vocab=p.vocab, rows=p.batch,
                           row_len=p.max_len, collate=collate, to_batch=to_batch,
                           stage=variant.stage,
                           inputs=lambda staged: variant.to_device(staged, dev),
                           forward=forward_loss, opt=opt,
                           padded=variant.padded)
    print(steps_line("decoder", args, policy, run, variant.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
