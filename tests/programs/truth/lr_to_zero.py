"""A learning rate that reaches exactly 0.0 (a linear decay to zero, set into torch.optim's
param groups): XLA bakes the special scalar 0 into the graph, so the step that reaches it
compiles a new graph inside torch.optim's own code. The line to change is the one that makes
the value (``lr = ...``), not the barrier nor a line of torch."""

import torch
import torch_xla

STEPS = 10
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    lr = 0.1 * max(0.0, 1.0 - step / 6)  # lazyscope-expect: recompile-note
    for group in opt.param_groups:
        group["lr"] = lr
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
