"""No pitfall: static shapes, no value read inside the loop, every op lowered.

The loss is read once, after the loop. lazyscope should report no finding after warm-up.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
