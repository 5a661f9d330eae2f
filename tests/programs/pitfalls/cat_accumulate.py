"""Pitfall: accumulating per-step losses with ``torch.cat`` on the device.

The LazyTensor blog's dynamic ``dummy_step``: the history tensor grows by one element per step,
so its shape (an input of the next step's graph) is new at every barrier and XLA compiles every
step. Fix: keep a fixed-size running sum on the device (``total += loss.detach()``) or write into
a preallocated buffer of fixed size.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = torch.zeros(1, device=dev)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    history = torch.cat((history, loss.detach().view(1)))  # lazyscope-expect: recompile
    torch_xla.sync()
print(f"mean loss {history[1:].mean().item():.4f}")
