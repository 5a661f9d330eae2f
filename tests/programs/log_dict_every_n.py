"""A dict of metrics logged every 5 steps with ``float(loss)``, before the step's barrier.

Each read cuts the step's graph on the steps it happens (one in five) and makes the host wait
for the device. The program already logs every N steps, which is what the advice for a per-step
read asks for: the report prices the reads over the run (on this tiny model a step is a few
milliseconds, so a read is a large share of it) and, where they still cost, says what is left
to do (an async step closure, or reading less often), never "log every N steps".
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
history = []
for step in range(40):
    x, y = torch.randn(16, 32).to(dev), torch.randn(16, 1).to(dev)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % 5 == 0:
        history.append({"step": step, "loss": float(loss)})
    torch_xla.sync()
print(f"logged {len(history)} times, last {history[-1]}")
