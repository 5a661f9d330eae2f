"""Healthy: a loop using the ``torch_xla.step()`` context manager as the step barrier."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32)
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _step in range(8):
    with torch_xla.step():
        x = torch.randn(8, 32).to(dev)
        loss = (model(x) - x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
print(f"final loss {loss.item():.4f}")
