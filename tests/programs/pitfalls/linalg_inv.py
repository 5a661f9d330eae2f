"""Pitfall: ``torch.linalg.inv`` on the device hides a host read.

``linalg.inv`` checks its LAPACK-style ``info`` flag for a singular matrix and raises an error:
on XLA that check reads a value (``aten::_local_scalar_dense``), so every call executes the
graph so far and waits for it. Fix: ``torch.linalg.inv_ex(A).inverse`` (no check), or
``torch.linalg.solve_ex``; check ``info`` later if needed.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(32, 16).to(dev)
    h = model(x)
    cov = h.T @ h / 32 + torch.eye(16, device=dev)
    precision = torch.linalg.inv(cov)  # lazyscope-expect: sync
    loss = (h @ precision * h).sum(1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
