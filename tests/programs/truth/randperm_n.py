"""A size made by ``torch.randperm(n)`` on the device, ``n`` read from a config that grows with
the step: a new graph at every step. The line to change is the randperm."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
bank = torch.randn(64, 16).to(dev)
config = {"negatives": [8 + 4 * i for i in range(8)]}
for step in range(8):
    x = torch.randn(8, 16).to(dev)
    idx = torch.randperm(config["negatives"][step], device=dev)  # lazyscope-expect: recompile
    negatives = bank[idx]
    loss = (model(x) @ negatives.T).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
