"""Variable-length batches through a tiny model: pad to max (static) or to longest (varying).

A user-style script (run it by path) that works on every backend. Each step draws ``--batch``
lengths uniform in 1..``--max-len``, pads them (``--policy max``: always to ``--max-len``, so
every step has the same shape; ``--policy longest``: to the longest sequence of the batch, so
dimension 1 varies) and runs a two-layer model over the padded batch. ``--graph-break`` plants a
``.item()`` inside ``forward`` (a graph break under torch.compile, a host sync everywhere).

    lazyscope trace --backend compile --steps 6 tests/programs/compile/padding.py \
        --policy longest
    python tests/programs/compile/padding.py --backend eager --policy max
"""

from __future__ import annotations

import statistics
import sys
import time

import lazyscope
from lazyscope_scenarios.kit import base_parser, positive_int, runtime_from_args


def build_parser():
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=6)
    parser.add_argument("--policy", choices=["max", "longest"], default="longest",
                        help="max: pad every batch to --max-len; longest: to the batch's longest")
    parser.add_argument("--batch", type=positive_int, default=4, help="sequences per batch")
    parser.add_argument("--max-len", type=positive_int, default=64, help="longest sequence")
    parser.add_argument("--dim", type=positive_int, default=32, help="model width")
    parser.add_argument("--train", action="store_true", help="backward and an SGD step too")
    parser.add_argument("--graph-break", action="store_true",
                        help="plant a .item() inside forward (a graph break under compile)")
    return parser


def build_model(dim: int, graph_break: bool):
    import torch

    class TinyModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = torch.nn.Linear(dim, dim)
            self.out = torch.nn.Linear(dim, 1)

        def forward(self, x, mask):
            h = torch.relu(self.inp(x))
            if graph_break:
                h = h / (1.0 + h.abs().max().item())  # planted graph break: .item()
            y = self.out(h).squeeze(-1)
            return (y * mask).sum() / mask.sum()

    return TinyModel()


def make_batch(gen, batch: int, max_len: int, dim: int, policy: str):
    """(x, mask, lengths): x is (batch, padded_len, dim), padded_len per the policy."""
    import torch

    lengths = torch.randint(1, max_len + 1, (batch,), generator=gen)
    padded = max_len if policy == "max" else int(lengths.max())
    x = torch.randn(batch, padded, dim, generator=gen)
    mask = (torch.arange(padded)[None, :] < lengths[:, None]).float()
    return x, mask, lengths


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    backend = runtime_from_args(args)
    dev = backend.device()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = build_model(args.dim, args.graph_break).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if args.train else None
    run_model = backend.prepare_model(model)
    lazyscope.set_info(scenario="compile-pitfalls/padding", policy=args.policy, batch=args.batch,
                 max_len=args.max_len, train=args.train, graph_break=args.graph_break)
    times = []
    for i in range(args.steps):
        x, mask, lengths = make_batch(gen, args.batch, args.max_len, args.dim, args.policy)
        x, mask = x.to(dev), mask.to(dev)
        lazyscope.annotate_step(seq_len=x.shape[1], real_tokens=int(lengths.sum()),
                      computed_tokens=x.shape[0] * x.shape[1])
        tic = time.perf_counter()
        with backend.step(i, "padding_step"):
            if opt is not None:
                loss = run_model(x, mask)
                loss.backward()
                opt.step()
                opt.zero_grad()
            else:
                with torch.no_grad():
                    loss = run_model(x, mask)
        times.append(time.perf_counter() - tic)
    print(f"compile-pitfalls/padding {args.policy} on {args.backend}: {args.steps} steps, "
          f"median step {statistics.median(times) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
