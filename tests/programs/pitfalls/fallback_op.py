"""Pitfall: an op without an XLA lowering (``torch.histc``) runs on the CPU every step.

torch_xla copies its inputs to the host, runs the aten kernel there and copies the result back.
Fix: replace the op with lowered ones (here: ``torch.bucketize`` is also unlowered; a
comparison against bin edges plus ``sum`` is lowered), or compute it outside the step.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    hist = torch.histc(x, bins=8, min=-3, max=3)  # lazyscope-expect: fallback
    loss = model(x).pow(2).mean() + 0.0 * hist.sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
