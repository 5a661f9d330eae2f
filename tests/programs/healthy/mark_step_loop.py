"""Healthy: the classic ``xm.mark_step()`` loop (the pre-2.x barrier), with a device-side
running loss read once after the loop."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
running = torch.zeros((), device=dev)
for _step in range(8):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    running += loss.detach()
    xm.mark_step()
print(f"mean loss {running.item() / 8:.4f}")
