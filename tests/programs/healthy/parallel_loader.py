"""Healthy: the parallel loader (MpDeviceLoader) over a DataLoader with drop_last=True.

MpDeviceLoader moves batches to the device in the background and marks the step at every
batch; drop_last=True keeps every batch the same shape across epochs.
"""

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

dev = torch_xla.device()
torch.manual_seed(0)
data = TensorDataset(torch.randn(40, 32), torch.randint(0, 4, (40,)))
loader = pl.MpDeviceLoader(DataLoader(data, batch_size=8, drop_last=True), dev)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
for _epoch in range(2):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
print(f"final loss {loss.item():.4f}")
