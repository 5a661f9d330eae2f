"""A length curriculum with one change (32 -> 64 at step 8) that also flips a Python branch on
the shape (long sequences are pooled in chunks): the new graph has other ops, not only other
sizes. A one-off: a note at the line that makes the batch of the new length."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    length = 32 if step < 8 else 64
    x = torch.randn(4, length, 16).to(dev)  # lazyscope-expect: recompile-note
    h = model(x)
    if h.shape[1] > 32:
        h = h.view(4, -1, 2, 16).amax(2)
    loss = h.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
