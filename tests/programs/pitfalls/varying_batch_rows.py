"""Pitfall: the number of rows in a batch changes from step to step (not only the last batch).

A sampler that yields "as many examples as fit a token budget" gives a different row count
almost every step (here 3..10): XLA compiles a new program for each, and each runs once or
twice. Fix: keep the batch size fixed: pad every batch to the largest row count and mask the
padded rows out of the loss, or make the sampler yield a constant number of rows. (A sampler
that cycles over two or three row counts compiles two or three graphs, each reused: bucketing,
not a problem.)
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    rows = 3 + (7 * step) % 8  # 3, 10, 9, 8, 7, 6, 5, 4: what fits the token budget
    x = torch.randn(rows, 32).to(dev)  # lazyscope-expect: recompile
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
