"""A jitted function made again inside the loop (``interop.jax_jit(step)`` per iteration): JAX
keys its cache on the function object, so each new object is traced and compiled again, though
the shapes never change. ``--once``: jitted once, before the loop."""

import argparse

import torch
import torchax
from torchax import interop

parser = argparse.ArgumentParser()
parser.add_argument("--once", action="store_true")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torchax.enable_globally()
w = torch.randn(8, 8).to("jax")


def step(w, x):
    return torch.tanh(x @ w) @ w.T


jitted = interop.jax_jit(step)
x = torch.randn(4, 8).to("jax")
for _ in range(args.steps):
    fn = jitted if args.once else interop.jax_jit(step)
    x = fn(w, x)
