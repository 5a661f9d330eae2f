"""A CUDA loop whose step time goes to three places: the DataLoader (a ``__getitem__`` that
decodes slowly, 2 ms a sample, batch 8, no workers: ~16 ms a step), the GPU (matmuls of
4096^2 in fp32, milliseconds) and, with ``--read``, a ``loss.item()`` every step that waits for
the GPU. Run by tests/integration/test_compile_backend.py on a GPU, traced with --backend eager.
"""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lazyscope


class SlowDecode(Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.002)  # decoding one sample
        return torch.full((256,), float(i))


parser = argparse.ArgumentParser()
parser.add_argument("--read", action="store_true")
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()

dev = torch.device("cuda")
w = torch.randn(4096, 4096, device=dev) / 64
loader = DataLoader(SlowDecode(), batch_size=8)  # lazyscope-expect: input
for step, x in enumerate(loader):
    x = x.to(dev)
    y = w
    for _ in range(8):
        y = torch.tanh(y @ w)
    loss = y.mean() + x.mean()
    if args.read:
        print(f"step {step}: loss {loss.item():.4f}")  # lazyscope-expect: sync
    lazyscope.barrier()
    if step + 1 == args.steps:
        break
