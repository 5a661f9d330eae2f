"""A training step for ``check --baseline`` (tests/integration/test_baseline.py): a 4-layer MLP
on XLA:CPU, about 20 ms of compute per step on this machine.

``--work N``: N forward and backward passes per step (N times the work, one graph);
``--read-every-step``: the loss read before the barrier (a host sync that cuts the step's graph
in two: one more execution every step)."""

import argparse

import torch
import torch_xla

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--work", type=int, default=1)
p.add_argument("--read-every-step", action="store_true")
args = p.parse_args()

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(256, 512).to(dev)
for step in range(args.steps):
    loss = sum(model(x + i).pow(2).mean() for i in range(args.work))
    loss.backward()
    if args.read_every_step:
        print(f"step {step}: loss {loss.item():.3f}")  # the read
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
