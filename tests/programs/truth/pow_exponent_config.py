"""A focal-loss exponent read from a config schedule: a Python float baked into the graph as a
constant at the ``pow``, a new graph at every value. The line to change is the pow (where the
float enters the graph), with a fix for a constant (a device tensor, or keep it fixed)."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
schedule = {"gamma": [2.0, 2.25, 2.5, 2.75, 3.0, 3.25]}
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    y = torch.randint(0, 4, (8,)).to(dev)
    logp = torch.log_softmax(model(x), dim=-1).gather(1, y[:, None]).squeeze(1)
    focus = (1 - logp.exp()).pow(schedule["gamma"][step])  # lazyscope-expect: recompile
    loss = -(focus * logp).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
