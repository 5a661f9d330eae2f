"""Pitfall: a Python int that changes every step used as a size in ``torch.full``.

``torch.full((num_neg, 32), 0.1)`` with ``num_neg`` counted on the host gives a tensor whose
shape is new at every step, and every op downstream with it: XLA compiles every step. Fix:
create the tensor at a fixed maximum size and mask the unused rows (a device tensor mask).
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    num_neg = 2 + step  # e.g. a count of negatives computed on the host
    x = torch.randn(8, 32).to(dev)
    negatives = torch.full((num_neg, 32), 0.1, device=dev)  # lazyscope-expect: recompile
    loss = model(x).pow(2).mean() - model(negatives).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
