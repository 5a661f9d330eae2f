"""Pitfall: ``torch.unique`` runs on the CPU (``aten::_unique2``): its output size depends on the
values, which XLA's static shapes cannot express.

Every step the labels go to the host and back. Fix: count with a fixed-size op on the device
(``torch.bincount``-like ``one_hot(y, C).sum(0) > 0``), or compute it in the input pipeline.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 8).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
seen = []
for _step in range(6):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 8, (16,)).to(dev)
    classes = torch.unique(y)  # lazyscope-expect: fallback
    seen.append(classes.numel())  # classes present in this batch, for the log
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"classes per batch: {seen}")
