"""Pitfall: a Python float exponent in ``x.pow(gamma)`` that changes every step.

Unlike most Python scalars (passed as device data), the exponent of ``Tensor.pow`` is baked into
the graph as a constant, so an annealed focal-loss ``gamma`` compiles a new program for every
value. Fix: make the exponent a device tensor (``x.pow(gamma_t)``), or keep it fixed.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    gamma = 2.0 + 0.25 * step  # annealed focal-loss exponent
    x = torch.randn(8, 32).to(dev)
    y = torch.randint(0, 4, (8,)).to(dev)
    logp = torch.log_softmax(model(x), dim=-1).gather(1, y[:, None]).squeeze(1)
    loss = -((1 - logp.exp()).pow(gamma) * logp).mean()  # lazyscope-expect: recompile
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
