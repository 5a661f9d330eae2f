"""Healthy: FSDPv2 (SPMD fully sharded data parallel), the shape of pytorch/xla's
examples/fsdp/train_decoder_only_fsdp_v2.py: SPMD on, a mesh over every device, the model
wrapped in SpmdFullyShardedDataParallel, the batch sharded on the data axis."""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
    SpmdFullyShardedDataParallel as FSDPv2,
)

xr.use_spmd()
devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(devices), (devices, 1), ("fsdp", "tensor"))
xs.set_global_mesh(mesh)
dev = torch_xla.device()
torch.manual_seed(0)
model = FSDPv2(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                   torch.nn.Linear(64, 32)).to(dev))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(6):
    x = torch.randn(8, 32).to(dev)
    xs.mark_sharding(x, mesh, ("fsdp", None))
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
