"""Batches of 4 sequences padded to their longest, through one self-attention layer: the
scores are (4, L, L), so a graph's bytes grow with L^2. Few steps, few distinct lengths."""

import torch
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
DIM, BATCH = 16, 4
wq = torch.randn(DIM, DIM, device=device, requires_grad=True)
wk = torch.randn(DIM, DIM, device=device, requires_grad=True)
opt = torch.optim.SGD([wq, wk], lr=0.01)
lengths = [40, 96, 64, 80, 96, 40, 64, 80]  # each batch's longest
for n in lengths:
    x = torch.randn(BATCH, n, DIM).to(device)  # the batch, padded to its longest
    scores = (x @ wq) @ (x @ wk).transpose(1, 2)  # (BATCH, n, n)
    loss = scores.softmax(-1).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
