"""Healthy: ZeRO-1 (torch_xla's ZeroRedundancyOptimizer) over a parallel loader, the shape of
pytorch/xla's test_train_mp_mnist_zero1.py: the optimizer shards its state and all-gathers the
parameters after each step; the loss is logged every 3 steps through a step closure."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4)).to(dev)
optimizer = ZeroRedundancyOptimizer(model.parameters(), torch.optim.SGD, lr=0.05,
                                    momentum=0.5, pin_layout=False)
data = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(9)]
loader = pl.MpDeviceLoader(data, dev)
loss_fn = torch.nn.CrossEntropyLoss()
for step, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    if step % 3 == 0:
        xm.add_step_closure(lambda s, v: print(f"step {s} loss {v.item():.4f}"),
                            args=(step, loss))
print("done")
