"""A torch_xla.compile'd step over the parallel loader (pytorch/xla's decoder-only example's
loop): the loader syncs before every batch and the compiled call ends at its own barrier. The
program's steps are its iterations, plus the loader's first sync (before any step ran) and its
sync at the end of the data (StopIteration): not one per batch on top of the iterations."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from counts import report

ITERATIONS = 5
dev = torch_xla.device()
model = torch.nn.Linear(8, 8).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(4, 8) for _ in range(ITERATIONS)]


def train_step(x):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss


step = torch_xla.compile(train_step)
for i, x in enumerate(pl.MpDeviceLoader(data, dev)):
    loss = step(x)
    xm.add_step_closure(lambda v, i=i: print(f"step {i} loss {float(v):.4f}"), args=(loss,))
report(ITERATIONS + 2)
