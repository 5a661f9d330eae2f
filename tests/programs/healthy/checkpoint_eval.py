"""Healthy: train, save a checkpoint, rebuild the model from it and evaluate it at the end.

The rebuilt model's evaluation compiles its own graphs once (a new model, new parameter
tensors) and reuses them over the evaluation batches: a new phase, not a recompilation.
"""

import os
import tempfile

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


dev = torch_xla.device()
torch.manual_seed(0)
model = make_model().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
for _step in range(10):
    x, y = torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
path = os.path.join(tempfile.mkdtemp(), "model.pt")
xm.save(model.state_dict(), path)
restored = make_model()
restored.load_state_dict(torch.load(path))
restored = restored.to(dev).eval()
correct = torch.zeros((), device=dev)
with torch.no_grad():
    for _batch in range(4):
        x, y = torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)
        correct += (restored(x).argmax(-1) == y).sum()
        torch_xla.sync()
print(f"restored model: {int(correct.item())} of 64 correct")
