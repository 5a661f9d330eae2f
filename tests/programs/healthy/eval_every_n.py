"""Healthy: training with an evaluation pass every 4 steps.

The eval graph (model.eval(), no_grad) is a new computation the first time and is reused at
every later evaluation; the training step's graph is reused between them.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(64, 4)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
val = [(torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)) for _ in range(2)]
correct = torch.zeros((), device=dev)
for step in range(12):
    model.train()
    x, y = torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    if step % 4 == 3:
        model.eval()
        with torch.no_grad():
            for vx, vy in val:
                correct += (model(vx).argmax(-1) == vy).sum()
                torch_xla.sync()
print(f"correct over all evaluations {int(correct.item())}")
