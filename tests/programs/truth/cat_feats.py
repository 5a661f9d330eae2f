"""A memory bank of features kept as a Python list and concatenated on the device each step:
``torch.cat(feats)`` has one more input every step. Fix: a fixed-size ring buffer on the
device, written in place."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
feats = []
for _step in range(12):
    x = torch.randn(8, 32).to(dev)
    out = model(x)
    feats.append(out.detach())
    bank = torch.cat(feats)  # lazyscope-expect: recompile
    loss = (out @ bank.T).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"loss {loss.item():.4f}")
