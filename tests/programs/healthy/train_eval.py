"""Healthy: 2 epochs of training, each followed by an eval phase (model.eval(), no_grad).

The eval graph is new structure the first time (warm-up), then reused in the second epoch. The
eval accuracy is accumulated on the device and read once per epoch (not per batch).
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
train = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(3)]
val = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(2)]
accuracy = []
for _epoch in range(2):
    model.train()
    for x, y in train:
        x, y = x.to(dev), y.to(dev)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
    model.eval()
    correct = torch.zeros((), device=dev)
    with torch.no_grad():
        for x, y in val:
            x, y = x.to(dev), y.to(dev)
            correct += (model(x).argmax(-1) == y).sum()
            torch_xla.sync()
    accuracy.append(correct)  # kept on the device
print(f"val accuracy per epoch {[round(a.item() / 32, 3) for a in accuracy]}")
