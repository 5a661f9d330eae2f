"""torch.compile pitfall: a function recompiled for every new shape until dynamo gives up.

With ``dynamic=False`` each new length is a recompilation; after
``torch._dynamo.config.recompile_limit`` of them (8 by default, 3 here to keep it short) dynamo
stops compiling the function and runs it eagerly for the rest of the run, with only a warning.
lazyscope reports that as an ``eager_fallback`` finding at the call line, with the limit and
the last reason. Fix: mark the varying dimension dynamic, or pad to a few bucket sizes.

    lazyscope trace --backend compile tests/programs/compile/recompile_limit.py
"""

import sys

import torch

import lazyscope

torch._dynamo.config.recompile_limit = 3


@torch.compile(backend="aot_eager", dynamic=False)
def score(x):
    return torch.softmax(x @ x.transpose(-1, -2), dim=-1).sum()


for n in [4, 6, 9, 11, 13, 15]:
    score(torch.randn(2, n, 8))  # lazyscope-expect: eager_fallback
    if "--no-barrier" not in sys.argv:
        lazyscope.barrier()
