"""Pitfall: a Python ``if`` on a tensor value inside the step.

``if t.sum() > 0:`` needs the value on the host: the graph so far executes mid-step, and the host
waits (pytorch/xla#1368). Fix: keep the decision on the device (``torch.where``) or move the
check after the barrier.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
skipped = 0
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    out = model(x)
    if out.sum() > 1e6:  # lazyscope-expect: sync
        skipped += 1
    loss = out.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"done, {skipped} large batches")
