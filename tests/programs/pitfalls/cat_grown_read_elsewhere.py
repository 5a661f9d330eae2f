"""Pitfall: a tensor grown by ``torch.cat`` at every step, read in a helper.

The history of losses grows by one element per step; a helper reads it to add a smoothing term
to the next step's loss, so its length is an input of every step's graph, and new every step.
XLA's metadata points at the helper's ``h.mean()``, the first op that reads the input; the line
to change is the ``torch.cat`` that grows it. Fix: a fixed-size buffer written by index, or a
running sum.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = torch.zeros(1, device=dev)


def smoothed(h):
    return h.mean()


for _step in range(8):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean() + 0.01 * smoothed(history)
    loss.backward()
    opt.step()
    opt.zero_grad()
    history = torch.cat((history, loss.detach().view(1)))  # lazyscope-expect: recompile
    torch_xla.sync()
print(f"last smoothed {smoothed(history).item():.4f}")
