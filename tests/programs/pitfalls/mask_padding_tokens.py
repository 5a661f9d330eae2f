"""Pitfall: dropping padding tokens with a boolean mask, ``h[mask]``, inside the step.

Even when the number of real tokens is the same every step (packed batches, so no new shapes),
boolean indexing needs ``aten::nonzero``, which has no XLA lowering: the mask is read back to the
host and the indices computed on the CPU, every step (a fallback and a sync). Fix: keep all
positions and weight the loss with the mask: ``(loss_per_token * mask).sum() / mask.sum()``.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
positions = torch.arange(8)
for _step in range(6):
    lengths = torch.tensor([3, 5, 8, 8])[torch.randperm(4)]  # 24 real tokens in every batch
    mask = (positions[None, :] < lengths[:, None]).to(dev)
    x = torch.randn(4, 8, 16).to(dev)
    h = model(x)
    tokens = h[mask]  # lazyscope-expect: fallback
    loss = tokens.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
