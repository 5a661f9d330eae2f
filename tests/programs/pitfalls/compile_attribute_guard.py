"""Pitfall (torch.compile): a module attribute that changes at every call, read in forward.

A schedule stored on the module (``model.step = i``, read in ``forward``) is guarded by dynamo
as a constant: every new value fails the guard and compiles the function again, until the
recompile limit makes it run eagerly. The line to change is the one that sets it at every
call; the compiled function's line that reads it is named too. Fix: pass the value as a tensor
argument (``model(x, torch.tensor(step))``) or keep it out of the compiled function.

    lazyscope trace --backend compile tests/programs/pitfalls/compile_attribute_guard.py
"""

import torch

import lazyscope


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.step = 0

    def forward(self, x):
        return self.lin(x) * (1.0 + 0.1 * self.step)


torch.manual_seed(0)
model = Scaled()
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    model.step = step  # lazyscope-expect: recompile
    loss = compiled(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    lazyscope.barrier()
print("done")
