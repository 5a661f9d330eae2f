"""Pitfall: ``loss.item()`` inside the step, before the barrier.

Reading a value forces the pending graph to execute mid-step and stalls the host until the value
is back: the device and the host take turns instead of overlapping. Fix: accumulate the loss on
the device and read it every N steps, or after the barrier in a step closure.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
running = 0.0
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    running += loss.item()  # lazyscope-expect: sync
    torch_xla.sync()
print(f"mean loss {running / 6:.4f}")
