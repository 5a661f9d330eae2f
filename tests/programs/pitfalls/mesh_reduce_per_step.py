"""Pitfall: ``xm.mesh_reduce`` called in the loop, every step.

``xm.mesh_reduce(tag, value, reduce_fn)`` gathers a value from every process *on the host*: it
copies the loss to the CPU at every call, so every step waits for the device. The read happens
inside torch_xla, but the call is the program's: the line to change is the mesh_reduce call.
Fix: reduce on the device (``xm.all_reduce``) and read the result every N steps, or call
mesh_reduce at the end of an epoch.
"""

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    losses.append(xm.mesh_reduce("loss", loss.detach(), np.mean))  # lazyscope-expect: sync
print(f"mean loss {float(np.mean(losses)):.4f}")
