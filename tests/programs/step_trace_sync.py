"""A profiled loop with a redundant barrier, the shape of pytorch/xla's
test/utils/train_spmd_linear_model.py: the whole step (optimizer included) inside an
``xp.StepTrace``, whose exit syncs, then the loop's own ``torch_xla.sync()``, which finds nothing
pending. One iteration is one step. (The other order cannot be written: torch_xla refuses a
sync inside a StepTrace, "Expecting scope to be empty".)"""

import torch
import torch_xla
import torch_xla.debug.profiler as xp
from counts import report

ITERATIONS = 6
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step() -> None:
    opt.zero_grad()
    model(torch.randn(8, 16, device=dev)).pow(2).mean().backward()
    opt.step()


for _ in range(ITERATIONS):
    with xp.StepTrace("train"):
        step()
    torch_xla.sync()
report(ITERATIONS)
