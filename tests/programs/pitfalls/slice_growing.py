"""Pitfall: slicing ``tokens[:, :n]`` with ``n`` changing every step (a length curriculum).

The slice bounds are constants of the graph, so each new ``n`` gives a new program shape and a
compilation. Fix: keep the slice length fixed and mask the positions beyond ``n`` instead
(``torch.arange(L) < n`` as a device tensor), or move through a few fixed lengths only.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
tokens = torch.randn(4, 64, 32).to(dev)  # one fixed batch kept on the device
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    n = 16 + 8 * step  # curriculum: longer context every step
    x = tokens[:, :n]  # lazyscope-expect: recompile
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
