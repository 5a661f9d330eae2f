"""Pitfall: ``print(loss)`` every step.

Printing a device tensor formats its value, which reads it back to the host: the pending graph
executes mid-step and the host waits for it. Fix: print in a step closure after the barrier
(``xm.add_step_closure(lambda: print(loss))``), or print every N steps.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(loss)  # lazyscope-expect: sync
    torch_xla.sync()
print("done")
