"""Healthy: the loss is logged every 2 steps from a step closure.

``xm.add_step_closure`` runs the print after the barrier, when the loss has been computed by the
step's own graph: no mid-step execution, no graph cut.
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


def log(step, loss):
    print(f"step {step} loss {loss.item():.4f}")


for step in range(8):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % 2 == 0:
        xm.add_step_closure(log, args=(step, loss))
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
