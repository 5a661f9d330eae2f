"""Sequences of varying length padded up to three buckets (64, 128, 256): one graph per bucket,
the 256 bucket the largest (the run's peak graph)."""

import torch
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
w = torch.randn(64, 64, device=device, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
BUCKETS = (64, 128, 256)
lengths = [50, 100, 200, 60, 120, 250, 40, 90]
for n in lengths:
    size = next(b for b in BUCKETS if b >= n)
    x = torch.randn(16, size, 64).to(device)  # the batch, padded to its bucket
    loss = (x @ w).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
