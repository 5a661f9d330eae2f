"""Eager mode: each op is compiled and executed on its own; the loop still marks steps."""

import torch
import torch_xla
from counts import report

torch_xla.experimental.eager_mode(True)
STEPS = 4
dev = torch_xla.device()
model = torch.nn.Linear(8, 8).to(dev)
for _ in range(STEPS):
    out = model(torch.randn(4, 8).to(dev)).relu().sum()
    torch_xla.sync()
report(STEPS)
