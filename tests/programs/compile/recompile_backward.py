"""torch.compile pitfall: a training step whose inputs change length every call, with a backward.

``dynamic=False`` makes every new length a recompilation; each one also compiles a backward
graph (AOTAutograd, at the first ``backward()``). lazyscope reports the recompiles at the line
that calls the compiled model (not at ``loss.backward()``, where the lazy backward compile
happens), with every argument that changed (``x`` and ``mask``), and the forward and backward
compile times apart. ``backend="aot_eager"`` keeps the example quick on a CPU; inductor behaves
the same. Fix: ``dynamic=True`` / ``torch._dynamo.mark_dynamic(x, 1)``, or pad to buckets.

    lazyscope trace --backend compile tests/programs/compile/recompile_backward.py
"""

import sys

import torch

import lazyscope


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, mask):
        return (self.lin(x) * mask).sum()


model = torch.compile(Model(), backend="aot_eager", dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
barrier = "--no-barrier" not in sys.argv
for n in [4, 6, 9, 5]:
    x, mask = torch.randn(2, n, 8), torch.ones(2, n, 1)
    loss = model(x, mask)  # lazyscope-expect: recompile
    loss.backward()
    opt.step()
    opt.zero_grad()
    if barrier:
        lazyscope.barrier()
