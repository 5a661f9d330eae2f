"""Pitfall: a value read hidden in a helper function called every step.

``log_metric`` calls ``.item()``: every call reads the value mid-step. The line to change is in
the helper; the loop's call is the caller in the finding's stack. Fix: keep the metric on the
device in the helper (a running sum tensor) and read it once, or log in a step closure.
"""

import torch
import torch_xla

dev = torch_xla.device()
history = []


def log_metric(name, value):
    history.append((name, value.item()))  # lazyscope-expect: sync


torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    log_metric("loss", loss)
    torch_xla.sync()
print(f"{len(history)} values logged")
