"""Pitfall: ``preds.tolist()`` every step to collect predictions.

``tolist()`` copies the values to Python: the graph so far executes mid-step and the host
stalls until it is back. Fix: keep the predictions on the device (``torch.cat`` into a
preallocated buffer, or accumulate counts) and read them once at the end, or in a step closure.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
predictions = []
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    y = torch.randint(0, 4, (8,)).to(dev)
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    predictions += logits.argmax(-1).tolist()  # lazyscope-expect: sync
    torch_xla.sync()
print(f"{len(predictions)} predictions")
