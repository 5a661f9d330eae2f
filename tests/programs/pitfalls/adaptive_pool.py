"""Pitfall: ``nn.AdaptiveAvgPool2d((3, 3))`` on a 7x7 feature map runs on the CPU.

torch_xla lowers adaptive average pooling only when the output size divides the input size;
7 -> 3 falls back to ``aten::_adaptive_avg_pool2d`` (and its backward) on the host every step.
Fix: pool to a divisor of the input size (7 -> 7 or 1), resize the input (e.g. 6x6 or 9x9
feature maps for a 3x3 output), or use ``nn.AvgPool2d`` with a fixed kernel.
"""

import torch
import torch_xla


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d((3, 3))
        self.head = torch.nn.Linear(8 * 9, 4)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        h = self.pool(h)  # lazyscope-expect: fallback
        return self.head(h.flatten(1))


dev = torch_xla.device()
torch.manual_seed(0)
model = Net().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(4, 3, 7, 7).to(dev)
    y = torch.randint(0, 4, (4,)).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
