"""Pitfall: an upsampling whose scale factor changes every step (a resolution curriculum).

``F.interpolate(x, scale_factor=s)`` makes its output size from the Python number ``s``: the
graph's inputs stay the same, an internal size changes, and XLA compiles again for each scale.
XLA's metadata points at the first op whose instructions changed (the convolution that takes the
upsampled image); the size is made by ``interpolate``, from ``scale`` set above it. A size
cannot be passed as a device tensor: fix it to a few scales, or one.
"""

import torch
import torch.nn.functional as F
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(dev)
opt = torch.optim.SGD(conv.parameters(), lr=0.01)
x = torch.randn(2, 3, 16, 16).to(dev)
for step in range(6):
    scale = 1.0 + 0.25 * step
    up = F.interpolate(x, scale_factor=scale, mode="nearest")  # lazyscope-expect: recompile
    loss = conv(up).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
