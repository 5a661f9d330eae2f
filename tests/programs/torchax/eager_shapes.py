"""Eager torchax (no jit): a small model run op by op on batches of varying length. JAX
compiles every op again for each new shape. ``--fixed``: one length (compiled once). Each
iteration ends with ``lazyscope.barrier()``, as eager programs mark their steps."""

import argparse

import torch
import torchax

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()

torchax.enable_globally()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
model = model.to("jax")

with torch.no_grad():
    for i in range(args.steps):
        rows = 4 if args.fixed else 4 + i
        x = torch.randn(rows, 8).to("jax")
        y = model(x)
        total = y.sum()
        lazyscope.barrier()
