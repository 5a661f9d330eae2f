"""Gradient accumulation: the optimizer (SGD with momentum) steps every 4 micro-batches, one
barrier per micro-batch. Four graphs, each holding more than the last: the first micro-batch
(it makes the gradients), the next ones (they add to them), the first optimizer step (it makes
the momentum buffers) and the later ones (they read them), all compiled by step 7 and reused
every cycle since: what stays on the device is flat from step 8 on. Not a leak: no
growing_memory finding, no recompile finding."""

import torch
import torch_xla

ACCUMULATE = 4
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 64)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
for step in range(32):
    x = torch.randn(16, 64).to(dev)
    loss = model(x).pow(2).mean() / ACCUMULATE
    loss.backward()
    if (step + 1) % ACCUMULATE == 0:
        opt.step()
        opt.zero_grad()
    torch_xla.sync()
print("done")
