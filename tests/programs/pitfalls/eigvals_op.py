"""Pitfall: ``torch.linalg.eigvals`` runs on the CPU (``aten::linalg_eig``, no XLA lowering).

Every step the matrix is copied to the host and the (complex) eigenvalues back. Fix: for a
symmetric matrix use ``torch.linalg.eigvalsh`` (lowered), or compute the spectrum only every N
steps outside the training step.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 16).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    spectrum = torch.linalg.eigvals(model.weight.detach())  # lazyscope-expect: fallback
    radius = spectrum.abs().max()
    torch_xla.sync()
print(f"spectral radius {radius.item():.3f}")
