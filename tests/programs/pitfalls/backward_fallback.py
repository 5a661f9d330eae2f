"""Pitfall: an op whose *backward* has no XLA lowering, called inside a module's forward.

``F.interpolate(mode="bilinear")`` is lowered, but its backward
(``aten::upsample_bilinear2d_backward``) runs on the CPU at every ``loss.backward()``: the
gradient goes to the host and back each step. The line to change is the interpolate call in
``forward()`` (the op that makes the backward), not the loop's ``model(x)`` or
``loss.backward()``. Fix: upsample with ops lowered both ways: ``nn.ConvTranspose2d`` or
nearest-neighbour by ``expand`` + ``reshape`` (``mode="nearest"`` falls back in backward too).
"""

import torch
import torch.nn.functional as F
import torch_xla


class Upsampler(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)
        return F.interpolate(h, scale_factor=2, mode="bilinear")  # lazyscope-expect: fallback


dev = torch_xla.device()
torch.manual_seed(0)
model = Upsampler().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(5):
    x = torch.randn(2, 3, 8, 8).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
