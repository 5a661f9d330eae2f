"""Pitfall (a note): a cast added once, mid-run.

From step 4 the script rounds the activations through bfloat16 ("switch to low precision half-way
through"): the graph changes once and stays. One extra compilation: worth knowing, not a
recurring cost. Fix: decide the precision before the loop.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    x = torch.randn(8, 32).to(dev)
    h = model(x)
    if step >= 4:
        h = h.to(torch.bfloat16).to(torch.float32)  # lazyscope-expect: recompile-note
    loss = h.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
