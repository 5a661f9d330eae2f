"""The LazyTensor blog's static vs dynamic graph.

From "Understanding LazyTensor System Performance with PyTorch/XLA on Cloud TPU": ``dummy_step``
multiplies two fixed matrices and sums the result. In ``static`` mode the step's loss replaces the
previous one, so the graph is the same every step: compile once, execute often. In ``dynamic``
mode the loss is accumulated with ``torch.cat``, so the loss tensor grows by one element per step,
its shape is new every step, and XLA compiles a new graph at every barrier.

    python -m lazyscope_scenarios.lazytensor_dynamic --mode dynamic --steps 30
    lazyscope trace --steps 30 --out runs/dyn lazytensor-dynamic --mode dynamic
"""

from __future__ import annotations

import statistics
import sys
import time

import lazyscope
from lazyscope_scenarios.kit import base_parser, runtime_from_args


def build_parser():
    parser = base_parser(__doc__.strip().splitlines()[0], default_steps=30)
    parser.add_argument(
        "--mode", choices=["static", "dynamic"], default="static",
        help="static: loss = step_loss; dynamic: loss = torch.cat((loss, step_loss))",
    )
    parser.add_argument("--size", type=int, default=512, help="rows of y (the blog's 512)")
    parser.add_argument(
        "--read-loss", action="store_true",
        help="read the loss with .item() every step (a device-to-host sync per step)",
    )
    return parser


def dummy_step(x, y, loss, acc: bool):
    """The blog's step: einsum, sum; the loss kept as one value or accumulated."""
    import torch

    z = torch.einsum("bs,st->bt", y, x)
    step_loss = z.sum().view(1)
    if acc:
        loss = torch.cat((loss, step_loss))
    else:
        loss = step_loss
    return loss


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    backend = runtime_from_args(args)
    dev = backend.device()
    torch.manual_seed(args.seed)
    x = torch.rand((args.size, 8)).to(dev)
    y = torch.rand((args.size, args.size)).to(dev)
    loss = torch.zeros(1).to(dev)
    step_fn = backend.prepare_model(dummy_step)  # torch.compile under --backend compile
    lazyscope.set_info(scenario="lazytensor-dynamic", mode=args.mode, size=args.size)
    times = []
    for i in range(args.steps):
        tic = time.perf_counter()
        with backend.step(i, "dummy_step"), backend.region("forward"):
            loss = step_fn(x, y, loss, acc=args.mode == "dynamic")
        if args.read_loss:
            loss.sum().item()
        times.append(time.perf_counter() - tic)
    print(
        f"lazytensor-dynamic {args.mode}: {args.steps} steps, median step "
        f"{statistics.median(times) * 1e3:.2f} ms, loss holds {loss.shape[0]} values"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
