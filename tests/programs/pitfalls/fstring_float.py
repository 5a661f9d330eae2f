"""Pitfall: ``float(loss)`` in an f-string log line, every step.

``float(t)`` reads the value: the graph so far executes mid-step and the host waits. Fix: log
after the barrier in a step closure, or every N steps.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step} loss {float(loss):.4f}")  # lazyscope-expect: sync
    torch_xla.sync()
