"""Pitfall: the last batch of each epoch is smaller, so it is a new graph shape.

18 samples in batches of 4 give 4, 4, 4, 4, 2: the fifth step, after the first epoch's steady
steps, compiles a second program. Over 2 epochs the 2-row graph is compiled once and then
reused, so this is one recompilation after warm-up: a note, not a finding (the cost is one
compile per distinct remainder), at the line that makes the loader. Fix:
``DataLoader(..., drop_last=True)`` or pad the last batch to the full batch size.
"""

import torch
import torch_xla
from torch.utils.data import DataLoader, TensorDataset

dev = torch_xla.device()
torch.manual_seed(0)
data = TensorDataset(torch.randn(18, 32), torch.randn(18, 32))
loader = DataLoader(data, batch_size=4)  # lazyscope-expect: recompile-note
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _epoch in range(2):
    for x, y in loader:
        x, y = x.to(dev), y.to(dev)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
print("done")
