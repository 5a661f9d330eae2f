"""Pitfall (a note): a learning rate, a Python float, that decays to exactly 0.0.

torch_xla passes a Python scalar to the graph as device data, except the special values 0 and
+-1, which it bakes into the graph as constants (so XLA can simplify). A linear decay that
reaches 0.0 for the last steps of the run compiles one more program at that step, after the
run's steady state: one recompilation, a note. The line to change is the one that sets the
value. Fix: keep the learning rate a device tensor (``lr = torch.tensor(..., device=dev)``),
stop the decay short of 0.0, or set ``XLA_NO_SPECIAL_SCALARS=1``.
"""

import torch
import torch_xla

STEPS = 8
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
for step in range(STEPS):
    lr = 0.1 * max(0.0, 1.0 - step / 5)  # lazyscope-expect: recompile-note
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)
            p.grad = None
    torch_xla.sync()
print("done")
