"""Pitfall: the number of rows in a batch changes from step to step (not only the last batch).

A sampler that yields 4, 5 or 6 examples per step (e.g. "as many as fit a token budget") gives
XLA a new input shape for each distinct row count: one compilation per row count. Fix: keep the
batch size fixed: pad every batch to the largest row count and mask the padded rows out of the
loss, or make the sampler yield a constant number of rows.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    rows = 4 + step % 3  # 4, 5, 6, 4, 5, 6, ...
    x = torch.randn(rows, 32).to(dev)  # lazyscope-expect: recompile
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
