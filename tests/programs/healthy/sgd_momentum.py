"""Healthy: a small MLP trained with SGD + momentum, static shapes, one read after the loop.

The first optimizer step creates the momentum buffers (a graph of new structure, warm-up, not a
recompile); every later step reuses the same graph.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
for _step in range(8):
    x = torch.randn(16, 32).to(dev)
    y = torch.randint(0, 4, (16,)).to(dev)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
