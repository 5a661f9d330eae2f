"""Healthy: a stack of layers run with torch_xla's ``scan_layers``, trained for a few steps.
The layers are wide enough (1024, a batch of 1024) that the device's work per step outweighs
the tracing ``scan_layers`` does at every call (tens of milliseconds on a 2-core VM): a stack of
32-wide layers would be host-bound, and lazyscope would say so.

``scan_layers`` traces one layer with AOTAutograd, which prints (``repr``) the fake tensors it
traces while it compiles: no value is read and nothing moves to the host (torch_xla counts no
transfer). None of it is a host sync.
"""

import torch
import torch_xla
from torch_xla.experimental.scan_layers import scan_layers

dev = torch_xla.device()
torch.manual_seed(0)
layers = torch.nn.ModuleList([torch.nn.Linear(1024, 1024) for _ in range(4)]).to(dev)
head = torch.nn.Linear(1024, 1).to(dev)
opt = torch.optim.SGD(list(layers.parameters()) + list(head.parameters()), lr=0.01)
for _step in range(6):
    x = torch.randn(1024, 1024).to(dev)
    loss = head(scan_layers(layers, x)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
