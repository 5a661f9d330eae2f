"""Pitfall: every batch has its own sequence length, so every step is a new graph shape.

XLA compiles one program per input shape: padding each batch only to its own longest sequence
recompiles at almost every step. Fix: pad to a few fixed bucket lengths (``lazyscope advise``).
"""

import torch
import torch_xla

LENGTHS = [17, 33, 9, 61, 25, 48, 5, 40]  # one new sequence length per step

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for seq_len in LENGTHS:
    x = torch.randn(4, seq_len, 32).to(dev)  # lazyscope-expect: recompile
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
