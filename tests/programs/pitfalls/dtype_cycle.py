"""Pitfall: the dtype of a cast changes from step to step.

A "precision sweep" that casts the activations to bfloat16, float16 or float64 depending on
the step gives a graph per dtype: the dtypes are part of the program. Fix: pick one dtype for
the whole run (or one per phase), decided before the loop.
"""

import torch
import torch_xla

DTYPES = [torch.bfloat16, torch.float16, torch.float64]

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    h = model(x).to(DTYPES[step % 3])  # lazyscope-expect: recompile
    loss = h.pow(2).mean().float()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
