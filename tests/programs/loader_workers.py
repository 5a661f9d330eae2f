"""A training loop fed by a ``DataLoader`` with two worker processes, what users run every day:
the workers are forked from the traced process (Linux's default start method) or spawned
(``multiprocessing_context="spawn"``), and must neither record steps nor end the parent's run.
Imported by ``loader_fork.py`` and ``loader_spawn.py``."""

import torch
import torch_xla
from counts import report
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset):
    def __len__(self) -> int:
        return 24

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), torch.randn(16, generator=g)


def main(context: str) -> None:
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Pairs(), batch_size=4, num_workers=2, multiprocessing_context=context)
    steps = 0
    for xb, yb in loader:
        loss = (model(xb.to(dev)) - yb.to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        steps += 1
    report(steps)
