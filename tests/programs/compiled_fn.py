"""torch_xla.compile(fn): each call of the compiled function ends at its barrier."""

import torch
import torch_xla
from counts import report

STEPS = 5
dev = torch_xla.device()
model = torch.nn.Linear(8, 8).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


step = torch_xla.compile(train_step)
for _ in range(STEPS):
    step(torch.randn(4, 8).to(dev))
report(STEPS)
