"""Input-bound: a classifier whose ``Dataset.__getitem__`` decodes each example slowly (10 ms a
sample, batch 8, no workers), so the loop waits ~80 ms for every batch while the step itself
takes a few. The line to change is the loader's (``num_workers``); the wait is in
``__getitem__``. ``--workers N`` is the fix applied; ``--guard`` runs the loop inside
``lazyscope.guard(max_input_share=0.1)``.
"""

import argparse
import contextlib
import time

import torch
import torch_xla
from torch.utils.data import DataLoader, Dataset

import lazyscope


class SlowDecode(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        time.sleep(0.01)  # lazyscope-expect: input-sample
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), i % 10


parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--guard", action="store_true",
                    help="run the loop inside lazyscope.guard(max_input_share=0.1)")
args = parser.parse_args()

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(SlowDecode(), batch_size=8, num_workers=args.workers,  # lazyscope-expect: input
                    persistent_workers=args.workers > 0)
guard = (lazyscope.guard(max_recompiles=None, max_input_share=0.1) if args.guard
         else contextlib.nullcontext())
with guard:
    for step, (x, y) in enumerate(loader):
        x, y = x.to(dev), y.to(dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if step + 1 == args.steps:
            break
