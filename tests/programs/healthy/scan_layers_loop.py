"""Healthy: a stack of layers run with torch_xla's ``scan_layers``, trained for a few steps.

``scan_layers`` traces one layer with AOTAutograd, which prints (``repr``) the fake tensors it
traces while it compiles: no value is read and nothing moves to the host (torch_xla counts no
transfer). None of it is a host sync.
"""

import torch
import torch_xla
from torch_xla.experimental.scan_layers import scan_layers

dev = torch_xla.device()
torch.manual_seed(0)
layers = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(4)]).to(dev)
head = torch.nn.Linear(32, 1).to(dev)
opt = torch.optim.SGD(list(layers.parameters()) + list(head.parameters()), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = head(scan_layers(layers, x)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
