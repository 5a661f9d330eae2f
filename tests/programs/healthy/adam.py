"""Healthy: a small MLP trained with Adam (its state appears at the first step: warm-up).

Adam's bias correction changes a Python float every step; torch_xla passes it as device data,
so the graph stays the same.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)
).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _step in range(8):
    x = torch.randn(16, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
