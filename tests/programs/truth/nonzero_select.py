"""A size made by a boolean mask: ``torch.nonzero(mask)`` picks the rows to keep, its length
follows the data, and the selection after it has a new shape whenever the count changes. The
line to change is the nonzero, with a fix for a size (a fixed shape: weight by the mask)."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(20):
    feats = torch.randn(1024, 16).to(dev)
    labels = (torch.rand(1024) > 0.5).to(dev)  # how many rows are kept follows the data
    keep = torch.nonzero(labels).squeeze(1)  # lazyscope-expect: recompile, fallback
    picked = feats.index_select(0, keep)
    loss = model(picked).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
