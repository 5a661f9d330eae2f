"""A small training loop with torch_xla's persistent compilation cache in the directory given
(``torch_xla.runtime.initialize_cache``, before the first computation), or none without one."""

import sys

import torch
import torch_xla
import torch_xla.runtime as xr

if len(sys.argv) > 1:
    xr.initialize_cache(sys.argv[1])
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(5):
    loss = model(torch.randn(8, 32).to(dev)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
