"""Host-bound: a deep stack of small layers (Linear + LayerNorm + GELU, a 4 x 16 batch, AdamW):
Python spends each step building the lazy graph of thousands of tiny ops (tracing) while
XLA runs the whole step in a fraction of that; most of it is AdamW's update of 240 small
parameter tensors. ``--compile`` is the fix lazyscope gives, applied: the optimizer's step and
the model compiled with ``torch.compile(..., backend="openxla")``, traced once by dynamo.
"""

import argparse
import time

import torch
import torch_xla
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.norm(self.fc(x)))


class Deep(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, default=80)
parser.add_argument("--steps", type=int, default=14)
parser.add_argument("--compile", action="store_true")
parser.add_argument("--time", action="store_true",
                    help="time the host's calls between barriers (untraced: the tracing share "
                    "measured without lazyscope)")
args = parser.parse_args()

dev = torch_xla.device()
torch.manual_seed(0)
model = Deep(args.depth).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step_fn = torch.compile(model, backend="openxla") if args.compile else model
opt_step = torch.compile(opt.step, backend="openxla") if args.compile else opt.step
x = torch.randn(4, 16).to(dev)
host, walls = [], []
last = time.perf_counter()
for _step in range(args.steps):
    t0 = time.perf_counter()
    loss = step_fn(x).pow(2).mean()
    loss.backward()
    opt_step()  # lazyscope-expect: host
    opt.zero_grad()
    host.append(time.perf_counter() - t0)
    torch_xla.sync()
    now = time.perf_counter()
    walls.append(now - last)
    last = now
if args.time:  # the steps after the first 4 (compilation)
    print(f"untraced tracing share {sum(host[4:]) / sum(walls[4:]):.4f}")
