"""A running mean over a Python list of per-step outputs, taken on the device before the
barrier: ``torch.stack(history)`` has one more input every step, so every step is a graph never
run before. Fix: keep a fixed-size running sum on the device, or stack after the loop."""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for _step in range(25):
    x = torch.randn(8, 32).to(dev)
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    history.append(out.detach())
    smooth = torch.stack(history).mean()  # lazyscope-expect: recompile
    torch_xla.sync()
print(f"smoothed loss {smooth.item():.4f}")
