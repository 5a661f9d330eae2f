"""Pitfall: a varying shape created inside a helper function called from the loop.

``make_batch`` builds each batch at its own sequence length, so every step is a new graph
shape. The line to change is in the helper (where the tensor is created), not the loop. Fix:
pad to a few fixed bucket lengths inside ``make_batch``.
"""

import torch
import torch_xla

LENGTHS = [12, 20, 28, 36, 44, 52]

dev = torch_xla.device()


def make_batch(seq_len):
    return torch.randn(4, seq_len, 32).to(dev)  # lazyscope-expect: recompile


torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for seq_len in LENGTHS:
    x = make_batch(seq_len)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
