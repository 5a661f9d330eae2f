"""Pitfall: ``.cpu().numpy()`` every step to log an array.

Moving a tensor to the CPU reads its value: the step's graph executes before the barrier and
the host waits. Fix: log from a step closure (``xm.add_step_closure``) or every N steps.
"""

import numpy as np
import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
norms = []
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    norms.append(out.detach().norm(dim=1).cpu().numpy())  # lazyscope-expect: sync
    torch_xla.sync()
print(f"mean norm {np.mean(norms):.4f}")
