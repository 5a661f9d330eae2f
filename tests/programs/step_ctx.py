"""torch_xla.step(): each iteration in the context manager ends at its barrier."""

import torch
import torch_xla
from counts import report

STEPS = 5
dev = torch_xla.device()
model = torch.nn.Linear(8, 8).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(STEPS):
    with torch_xla.step():
        loss = model(torch.randn(4, 8).to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
report(STEPS)
