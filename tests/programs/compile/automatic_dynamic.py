"""torch.compile's default: a new length recompiles once, then the dimension is dynamic.

Without ``dynamic=``, torch compiles for the first shape, recompiles once when a dimension
changes, and marks that dimension dynamic: later lengths reuse the dynamic graph. This is no
recompile storm: lazyscope reports a single note (not a finding) that says torch made the
dimension dynamic, and the run passes ``lazyscope check``.

    lazyscope trace --backend compile tests/programs/compile/automatic_dynamic.py
"""

import torch

import lazyscope


@torch.compile(backend="aot_eager")
def normalize(x):
    return (x - x.mean(dim=1, keepdim=True)) / (x.std(dim=1, keepdim=True) + 1e-5)


for n in [4, 6, 9, 11, 13, 15]:
    normalize(torch.randn(2, n, 8))  # lazyscope-expect: recompile-note
    lazyscope.barrier()
