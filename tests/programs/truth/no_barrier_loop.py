"""A training loop with no barrier: no torch_xla.sync(), no mark_step, no parallel loader.

Each iteration adds its forward, backward and optimizer step to one pending graph, compiled
once, huge, when the loss is read after the loop (pytorch/xla #6948's out-of-memory). Fix: a
barrier per iteration (torch_xla.sync()), or iterate through MpDeviceLoader."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 32)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = torch.zeros((), device=dev)
for _step in range(12):  # lazyscope-expect: no_barrier
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    total += loss.detach()
print(f"mean loss {total.item() / 12:.4f}")
