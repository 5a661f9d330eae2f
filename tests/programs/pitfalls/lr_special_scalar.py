"""Pitfall: a learning rate as a Python float that hits 0.0 and 1.0 (XLA's special scalars).

torch_xla passes a Python scalar to the graph as device data, except the special values 0 and
+-1, which it bakes into the graph as constants (so XLA can simplify). A triangular cyclic
schedule between 0.0 and 1.0 gives three graphs: lr = 0.0 (constant), 0.5 (data), 1.0
(constant). The step where the constant 0.0 becomes an input reads like state created at the
first step (an optimizer's, an accumulator's) and is not counted; the step where 1.0 is baked in
is: one recompilation, a note. Fix: keep the learning rate a device tensor (``lr_t = torch.tensor(lr, device=dev)``
and ``p.sub_(lr_t * p.grad)``), avoid exactly 0.0/1.0, or set ``XLA_NO_SPECIAL_SCALARS=1``.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
for step in range(8):
    lr = 1.0 - abs(step % 4 - 2) / 2  # 0.0, 0.5, 1.0, 0.5, 0.0, ...
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)  # lazyscope-expect: recompile-note
            p.grad = None
    torch_xla.sync()
print("done")
