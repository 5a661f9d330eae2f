"""Healthy and balanced: batches made ahead by two DataLoader workers and uploaded by torch_xla's
MpDeviceLoader, a model whose step the device spends most of its time on (matmuls of 512^2 on a
batch of 256), the loss read after the loop. No finding.
"""

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

dev = torch_xla.device()
torch.manual_seed(0)
data = TensorDataset(torch.randn(256 * 12, 512), torch.randint(0, 10, (256 * 12,)))
loader = pl.MpDeviceLoader(DataLoader(data, batch_size=256, num_workers=2,
                                      persistent_workers=True), dev)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = torch.zeros((), device=dev)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    total += loss.detach()
print(f"mean loss {total.item() / 12:.4f}")
