"""A 1024x1024 f32 weight trained by SGD, updated in place: the step graph donates its buffer."""

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
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None
    torch_xla.sync()
