"""SPMD: the program calls use_spmd() itself, builds a mesh over 4 CPU devices
(CPU_NUM_DEVICES=4) and shards its batch."""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from counts import report

xr.use_spmd()
STEPS = 4
n = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
dev = torch_xla.device()
model = torch.nn.Linear(16, 16).to(dev)
for _ in range(STEPS):
    x = torch.randn(8, 16).to(dev)
    xs.mark_sharding(x, mesh, ("data", None))
    loss = model(x).pow(2).mean()
    loss.backward()
    torch_xla.sync()
report(STEPS)
