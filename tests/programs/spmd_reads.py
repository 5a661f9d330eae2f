"""SPMD with a value read right after each step's barrier (``loss.item()`` after
``torch_xla.sync()``, as a training loop logs its loss): the read comes while the step may
still execute, its output a placeholder that torch_xla fills in from another thread. lazyscope's
read hook must not touch that placeholder's data (it once did, and crashed about one run in two
of this program with SIGSEGV)."""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from counts import report

xr.use_spmd()
STEPS = 600
n = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
dev = torch_xla.device()
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0.0
for _ in range(STEPS):
    x = torch.randn(8, 16).to(dev)
    xs.mark_sharding(x, mesh, ("data", None))
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    total += loss.item()
report(STEPS)
