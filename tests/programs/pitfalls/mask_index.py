"""Pitfall: boolean-mask indexing ``x[x > 0.5]`` inside the step (to count confident outputs).

The result's size depends on the values, so torch_xla computes ``aten::nonzero`` on the CPU,
reading the mask back to the host (a sync too) every step. (Had the selected values fed the loss,
their data-dependent size would also recompile the rest of the step.) Fix: keep the shape
static: ``(out > 0.5).sum()`` stays on the device; read it once, or in a step closure.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
counts = []
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    out = model(x)
    n_confident = out[out > 0.5].numel()  # lazyscope-expect: fallback
    counts.append(n_confident)
    loss = out.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"{sum(counts)} confident outputs")
