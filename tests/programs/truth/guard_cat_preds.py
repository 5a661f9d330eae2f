"""An evaluation loop under ``lazyscope.guard(max_recompiles=0)`` that keeps its predictions in
a Python list and concatenates them on the device every step (``torch.cat(preds)``): one more
input every step, a graph never run before at every barrier. torch_xla compiles 10 graphs in 10
steps; the guard must raise, naming the ``torch.cat`` line. ``--fixed`` keeps a running sum on
the device instead (the guard passes); ``--untraced`` runs the loop without the guard and prints
torch_xla's own compile count (``CompileTime N``)."""

import argparse
import contextlib

import torch
import torch_xla

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
parser.add_argument("--untraced", action="store_true")
args = parser.parse_args()

guard = contextlib.nullcontext() if args.untraced else \
    lazyscope.guard(max_recompiles=0, warmup_steps=2)
with guard:
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(dev)
    preds = []
    total = torch.zeros((), device=dev)
    with torch.no_grad():
        for step in range(10):
            x = torch.randn(8, 16).to(dev)
            if args.fixed:
                total += model(x).argmax(-1).float().sum()
            else:
                preds.append(model(x).argmax(-1).float())
                seen = torch.cat(preds).sum()  # the line to change
            torch_xla.sync()
            print(f"step {step} done", flush=True)
if args.untraced:
    import torch_xla.debug.metrics as met

    print(f"CompileTime {(met.metric_data('CompileTime') or [0])[0]}")
