"""Pitfall: ``torch.arange(step + 5)`` inside the step: a Python int sets a tensor's shape.

The arange's length is part of the graph, so every new length is a new program: XLA compiles
at every step. Fix: create the positions once at the maximum length (outside the loop) and slice
or mask to a fixed size, or keep the length constant.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
pos_table = torch.nn.Embedding(16, 32).to(dev)
params = list(model.parameters()) + list(pos_table.parameters())
opt = torch.optim.SGD(params, lr=0.01)
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    positions = torch.arange(step + 5, device=dev)  # lazyscope-expect: recompile
    bias = pos_table(positions).mean(0)
    loss = (model(x) + bias).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
