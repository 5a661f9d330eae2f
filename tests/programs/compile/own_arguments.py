"""A user script with its own argparse: lazyscope's --device never reaches it.

In ``lazyscope trace --backend compile --device cpu own_arguments.py``, ``--device`` is
lazyscope's option; the script's sys.argv holds only what comes after the script (here nothing). An argparse that rejects
unknown arguments fails if it ever sees --device.

    lazyscope trace --backend compile --device cpu tests/programs/compile/own_arguments.py --steps 2
"""

import argparse

import torch

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()  # exits with status 2 on an argument it does not know

model = torch.compile(torch.nn.Linear(4, 4), backend="aot_eager")
for _ in range(args.steps):
    model(torch.randn(2, 4))
    lazyscope.barrier()
print(f"own_arguments: {args.steps} steps")
