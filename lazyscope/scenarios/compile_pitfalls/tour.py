"""Every torch.compile finding in one short run (the compile backend's saved test run).

A training step recompiled for each new length (with its lazy backward compiles), a graph
break at an ``.item()``, and a function that hits the recompile limit and runs eagerly.

    lazyscope trace lazyscope/scenarios/compile_pitfalls/tour.py --backend compile
"""

import torch

import lazyscope

torch._dynamo.config.recompile_limit = 3


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, mask):
        return (self.lin(x) * mask).sum()


@torch.compile(backend="aot_eager")
def clipped(h):
    peak = h.abs().max().item()  # a graph break
    return h / (1.0 + peak)


@torch.compile(backend="aot_eager", dynamic=False)
def score(x):
    return torch.softmax(x @ x.transpose(-1, -2), dim=-1).sum()


model = torch.compile(Model(), backend="aot_eager", dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for n in [4, 6, 9, 5, 11]:
    x, mask = torch.randn(2, n, 8), torch.ones(2, n, 1)
    loss = model(x, mask)
    loss.backward()
    opt.step()
    opt.zero_grad()
    clipped(torch.randn(2, 8))
    score(x)
    lazyscope.barrier()
