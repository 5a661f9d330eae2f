"""torch.compile under ``lazyscope.guard()``: a compiled function called once per step (a step
ends at ``lazyscope.barrier()``), whose Python argument ``scale`` changes at step 5 (dynamo
guards on it: a recompilation). ``--recompile-at -1``: it never changes."""

from __future__ import annotations

import argparse

import torch

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--recompile-at", type=int, default=5)
args = parser.parse_args()


@torch.compile(backend="eager")
def step_fn(x: torch.Tensor, scale: float) -> torch.Tensor:
    return (x * scale).relu().sum()


x = torch.randn(4, 4)
with lazyscope.guard(max_recompiles=0, warmup_steps=2, backend="compile"):
    for step in range(args.steps):
        scale = 2.0 if 0 <= args.recompile_at <= step else 1.0  # the line to change
        step_fn(x, scale)
        lazyscope.barrier()
        print(f"step {step} done", flush=True)
