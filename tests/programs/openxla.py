"""torch.compile(backend="openxla"): dynamo hands graphs to torch_xla, whose bridge syncs
internally; the first compile falls in step 0."""

import torch
import torch_xla
from counts import report

STEPS = 4
dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to(dev)
compiled = torch.compile(model, backend="openxla")
for _ in range(STEPS):
    with torch.no_grad():
        out = compiled(torch.randn(4, 8).to(dev))
    torch_xla.sync()
report(STEPS)
