"""A ``loss.item()`` every step on a step that is mostly device time (matmuls of 1024^2 on a
batch of 512): the read waits for the step's execution before the barrier, and the host cannot
trace the next step while the device runs this one. ``--every N`` reads every N steps.
"""

import argparse

import torch
import torch_xla

parser = argparse.ArgumentParser()
parser.add_argument("--every", type=int, default=1)
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 1024).to(dev)
for step in range(args.steps):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % args.every == 0:
        print(f"step {step}: loss {loss.item():.4f}")  # lazyscope-expect: sync
    torch_xla.sync()
