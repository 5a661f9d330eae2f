"""torch.compile of a correctly bucketed loop: three lengths, each compiled once and reused.

Sequences padded up to one of three bucket lengths (16, 32, 48), compiled with
``dynamic=False``: torch compiles one graph per bucket in the first steps and every later step
reuses one of them. No recompile storm: lazyscope counts each compiled graph's calls, says the
buckets are reused (a note, not a finding) and the run passes ``lazyscope check``.

    lazyscope trace --backend compile tests/programs/compile/bucketed.py
"""

import torch

import lazyscope

BUCKETS = (16, 32, 48)
LENGTHS = [5, 20, 40, 12, 33, 47, 9, 30, 44, 16, 17, 48]


@torch.compile(backend="aot_eager", dynamic=False)
def pooled(x):
    return torch.tanh(x).mean(dim=1)


def bucket(n):
    return next(b for b in BUCKETS if n <= b)


torch.manual_seed(0)
for n in LENGTHS:
    x = torch.nn.functional.pad(torch.randn(2, n, 8), (0, 0, 0, bucket(n) - n))
    pooled(x)
    lazyscope.barrier()
