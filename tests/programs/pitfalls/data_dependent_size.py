"""Pitfall: a tensor whose size depends on the data (a boolean mask) feeding the rest of the
step.

``scores[scores > 0]`` keeps as many elements as are positive: a different number every step,
so every op after it sees a new shape and XLA compiles the step again (and the boolean index
itself, ``aten::nonzero``, runs on the CPU). The line to change is the one that makes the
data-dependent size, not the ops that use it. Fix: keep the shape fixed:
``torch.where(scores > 0, scores, 0)`` (or multiply by the mask) and reduce over the full
tensor.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    scores = model(x).flatten()
    kept = scores[scores > 0]  # lazyscope-expect: recompile, fallback
    loss = kept.pow(2).mean() + 0.0 * scores.sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
