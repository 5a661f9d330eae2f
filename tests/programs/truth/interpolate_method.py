"""An output size set by ``F.interpolate(scale_factor=s)`` inside a module's ``forward``, ``s``
taken from a schedule: the size is made inside the graph from a Python float, a new graph at
every new scale. The line to change is the interpolate, with a fix for a size
(``size=`` from a fixed set)."""

import torch
import torch.nn.functional as F
import torch_xla

SCALES = [1.0, 1.25, 1.5, 1.75, 2.0, 2.25]


class Up(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        up = F.interpolate(x, scale_factor=scale, mode="nearest")  # lazyscope-expect: recompile
        return self.conv(up)


dev = torch_xla.device()
torch.manual_seed(0)
model = Up().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2, 3, 16, 16).to(dev)
for step in range(6):
    loss = model(x, SCALES[step]).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
