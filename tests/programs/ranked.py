"""One of several processes a launcher starts (RANK / WORLD_SIZE set), each on its own CPU
device; rank 1 runs a different batch shape in its last step (a divergent graph)."""

import os

import torch
import torch_xla
from counts import report

STEPS = 4
dev = torch_xla.device()
rank = int(os.environ.get("RANK", "0"))
model = torch.nn.Linear(8, 8).to(dev)
for step in range(STEPS):
    rows = 3 if (rank == 1 and step == STEPS - 1) else 4
    out = model(torch.randn(rows, 8).to(dev)).sum()
    torch_xla.sync()
report(STEPS)
