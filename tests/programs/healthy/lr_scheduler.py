"""Healthy: a learning-rate schedule with torch.optim.lr_scheduler.StepLR.

The scheduler changes the optimizer's Python float lr; torch_xla passes such scalars to the
graph as device data (unless exactly 0 or +-1), so a decaying lr does not recompile.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
loss_fn = torch.nn.CrossEntropyLoss()
for _step in range(8):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 4, (16,)).to(dev)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}, lr {sched.get_last_lr()[0]:.4f}")
