"""Pitfall: ``torch.median`` has no XLA lowering: it runs on the CPU (``aten::median``).

A robust (median-based) loss computes the median of the residuals every step: the residuals go
to the host, the median comes back. Fix: ``torch.quantile(r, 0.5)`` or
``torch.kthvalue`` / ``torch.sort`` (lowered), or a mean-based statistic.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    residual = (model(x) - x).abs()
    scale = torch.median(residual.detach())  # lazyscope-expect: fallback
    loss = (residual / (scale + 1e-3)).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
