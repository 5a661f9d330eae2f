"""layer_norm's ``eps`` taken from a schedule: a Python float baked into the graph as a
constant, a new graph for every value. Fix: keep eps fixed (or pass a device tensor where the
op takes one)."""

import torch
import torch.nn.functional as F
import torch_xla

EPS = [1e-5, 1e-4, 1e-3, 1e-2, 3e-2, 1e-1]
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    h = model(x)
    h = F.layer_norm(h, (32,), eps=EPS[step])  # lazyscope-expect: recompile
    loss = h.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
