"""A length made on the device by ``torch.arange(n)`` inside a helper, ``n`` growing with the
step: the graph's inputs are the same, an internal size changes at every step. The line to
change is the one that makes the size (the arange), with a fix for a size."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
table = torch.nn.Embedding(64, 32).to(dev)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD([*table.parameters(), *model.parameters()], lr=0.01)


def positions(n: int) -> torch.Tensor:
    return torch.arange(n, device=dev)  # lazyscope-expect: recompile


for step in range(8):
    x = torch.randn(8, 32).to(dev)
    bias = table(positions(6 + 3 * step)).mean(0)
    loss = (model(x) + bias).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
