"""Healthy: the loss is logged every 3 steps through an asynchronous step closure.

``xm.add_step_closure(fn, run_async=True)`` reads the loss after the barrier, on another thread:
the training loop neither waits nor cuts its graph. The logging steps run the same graph as the
others.
"""

import torch
import torch_xla
import torch_xla.core.xla_model as xm

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
seen = []


def log(step, loss):
    seen.append(f"step {step} loss {loss.item():.4f}")


for step in range(12):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % 3 == 0:
        xm.add_step_closure(log, args=(step, loss), run_async=True)
    torch_xla.sync()
xm.wait_device_ops()
print("\n".join(seen))
