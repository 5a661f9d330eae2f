"""``lazyscope.guard()`` entered where users put it: around the training loop, after the model
was moved to the device (the runtime started, transfers done). The batch's row count changes as
``--rows`` says (``grow``: 5 then 6 from step 4; ``switch``: 8, then 12 from step 10 to the end;
``six``: a new row count in six steps); the guard must name the line that makes the batch.

``--guard`` enters the guard; without it the loop runs untraced and prints torch_xla's own
compile count at the end (``CompileTime N``)."""

from __future__ import annotations

import argparse
import contextlib

import torch
import torch_xla

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--rows", default="grow", choices=["grow", "switch", "six", "none"])
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--guard", action="store_true")
args = parser.parse_args()


def rows(step: int) -> int:
    if args.rows == "grow":
        return 5 if step < 4 else 6
    if args.rows == "switch":
        return 8 if step < 10 else 12
    if args.rows == "six":
        return 4 + min(step // 3, 6) if step >= 3 else 4
    return 8


dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
guard = lazyscope.guard(max_recompiles=0, warmup_steps=2) if args.guard else \
    contextlib.nullcontext()
with guard:
    for step in range(args.steps):
        batch = torch.randn(rows(step), 16).to(dev)  # the line to change
        loss = model(batch).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        print(f"step {step} done", flush=True)
if not args.guard:
    import torch_xla.debug.metrics as met

    print(f"CompileTime {(met.metric_data('CompileTime') or [0])[0]}")
