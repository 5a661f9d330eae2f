"""A compiled training loop on CUDA that makes the host wait twice per step.

The model is compiled (inductor); the loop around it copies the predictions to the host for a
metric (``.cpu()``) and reads the loss (``loss.item()``), each right after the GPU was given
work, so the host stalls until that work is done. lazyscope reports both syncs at these lines,
with the time the host waited. Fix: keep the metric and the loss on the device and read them
every N steps (or ``non_blocking=True`` into pinned memory).

    lazyscope trace --backend compile --device cuda tests/programs/compile/cuda_syncs.py
"""

import torch

import lazyscope

dim, rows = 4096, 8192
model = torch.compile(torch.nn.Sequential(
    *[torch.nn.Linear(dim, dim) for _ in range(4)])).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
for step in range(6):
    x = torch.randn(rows, dim, device="cuda")
    out = model(x)
    preds = out.argmax(-1).cpu()  # lazyscope-expect: sync after the forward
    loss = out.float().square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step} loss {loss.item():.4f} pred0 {int(preds[0])}")  # lazyscope-expect: sync
    lazyscope.barrier()
