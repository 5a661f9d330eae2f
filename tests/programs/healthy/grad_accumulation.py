"""Healthy: gradient accumulation over 4 micro-batches, optimizer.step() every 4.

Two graphs alternate: the micro-batch graph (forward + backward, gradients accumulated) and the
optimizer-step graph (new structure: warm-up, not a recompile). Both are compiled once.
"""

import torch
import torch_xla

ACCUM = 4

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for micro in range(8):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean() / ACCUM
    loss.backward()
    if (micro + 1) % ACCUM == 0:
        opt.step()
        opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item() * ACCUM:.4f}")
