"""The same loop, the weight rebound out of place: the step graph cannot donate its buffer."""

import torch
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
w = torch.randn(1024, 1024, device=device, requires_grad=True)
lr = 0.01
for _ in range(6):
    x = torch.randn(8, 1024, device=device)
    loss = (x @ w).square().mean()
    loss.backward()
    w = (w - lr * w.grad).detach().requires_grad_()
    torch_xla.sync()
