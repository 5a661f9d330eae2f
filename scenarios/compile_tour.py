"""Every torch.compile finding in one short run (the compile backend's saved test run).

A training step recompiled for each new length (with its lazy backward compiles), a graph
break at an ``.item()``, and a function that hits the recompile limit and runs eagerly.

    lazyscope trace --backend compile compile-tour
    python -m lazyscope_scenarios.compile_tour --backend compile
"""

from __future__ import annotations

import sys

import torch

import lazyscope
from lazyscope_scenarios.kit import base_parser

#: one new length per step: the step recompiles until torch.compile gives up (limit 3)
LENGTHS = [4, 6, 9, 5, 11]


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, mask):
        return (self.lin(x) * mask).sum()


def clipped(h):
    peak = h.abs().max().item()  # a graph break
    return h / (1.0 + peak)


def score(x):
    return torch.softmax(x @ x.transpose(-1, -2), dim=-1).sum()


def build_parser():
    return base_parser(__doc__.splitlines()[0], default_steps=len(LENGTHS),
                       prog="lazyscope_scenarios.compile_tour")


def parse_args(argv: list[str] | None = None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.backend == "xla":
        parser.error("compile-tour runs on --backend compile or --backend eager")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch._dynamo.config.recompile_limit = 3
    torch.manual_seed(args.seed)
    model = torch.compile(Model(), backend="aot_eager", dynamic=False)
    clip = torch.compile(clipped, backend="aot_eager")
    scored = torch.compile(score, backend="aot_eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for n in LENGTHS[: args.steps]:
        x, mask = torch.randn(2, n, 8), torch.ones(2, n, 1)
        loss = model(x, mask)
        loss.backward()
        opt.step()
        opt.zero_grad()
        clip(torch.randn(2, 8))
        scored(x)
        lazyscope.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
