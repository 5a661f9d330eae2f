"""torch.compile pitfall: a graph break that dynamo cannot split around, so the whole function
runs eagerly at every call, with no graph and no warning.

A ``print`` inside a user-defined ``@contextmanager`` block cannot be split into two graphs
(dynamo would have to resume inside the context manager): dynamo gives up on ``step`` entirely.
lazyscope reports a ``graph_break`` finding at the offending line that says the whole function
runs uncompiled. Fix: move the context manager (or the print) out of the compiled function.

    lazyscope trace --backend compile tests/programs/compile/whole_function.py
"""

import contextlib
import sys

import torch

import lazyscope


@contextlib.contextmanager
def timed(name):
    yield name


@torch.compile(backend="aot_eager")
def step(x, w):
    with timed("matmul"):
        y = x @ w
        print("step done")  # lazyscope-expect: graph_break
    return torch.relu(y).sum()


w = torch.randn(16, 16)
for _ in range(4):
    step(torch.randn(8, 16), w)
    if "--no-barrier" not in sys.argv:
        lazyscope.barrier()
