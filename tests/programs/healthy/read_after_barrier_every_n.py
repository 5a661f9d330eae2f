"""Healthy: the loss read every 10 steps, after the step's barrier.

``torch_xla.sync()`` ends the step and runs its graph; the ``loss.item()`` after it reads a value
the device has already computed: it cuts no graph and forces no execution, and it happens on one
step in ten. This is what the advice for a per-step read asks for: nothing to change.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(40):
    x, y = torch.randn(16, 32).to(dev), torch.randn(16, 1).to(dev)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
