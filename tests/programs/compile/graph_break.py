"""torch.compile pitfall: ``.item()`` inside the compiled function is a graph break.

Dynamo cannot put a Python float into the graph: it stops tracing at ``.item()``, runs the
graph before it, hands the value to Python, and resumes in a second graph. lazyscope reports
the break at that line with dynamo's reason in full and its hints. Fix: return the tensor and
read it after the step, or ``torch._dynamo.config.capture_scalar_outputs = True``.

    lazyscope trace --backend compile tests/programs/compile/graph_break.py
"""

import sys

import torch

import lazyscope


@torch.compile(backend="aot_eager")
def step(x, w):
    h = torch.relu(x @ w)
    scale = h.abs().max().item()  # lazyscope-expect: graph_break
    return h / (1.0 + scale)


w = torch.randn(8, 8)
for _ in range(3):
    out = step(torch.randn(4, 8), w)
    if "--no-barrier" not in sys.argv:
        lazyscope.barrier()
