"""A loop of 40 steps of about 20 ms each that starts recompiling at step 20: from there on the
batch gets one row longer every step (a new shape, a new graph each step).

``--sleep-ms N`` (default 20) is the host time each step adds (the "20 ms added" of the baseline
test uses 40); ``--recompile-at K`` (default 20; -1: never) is where the shapes start to vary;
``--guard`` runs the loop inside ``lazyscope.guard()``; ``--compile-first`` has torch_xla compile
a graph of its own before the guard is entered (its compilations are then counted but not
explained); ``--read-stderr-at N`` prints the live alerts found on the process's stderr (a file)
at the end of step N."""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch_xla

import lazyscope

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--sleep-ms", type=float, default=20.0)
parser.add_argument("--recompile-at", type=int, default=20)
parser.add_argument("--guard", action="store_true")
parser.add_argument("--compile-first", action="store_true")
# at the end of step N, print what lazyscope said on this process's stderr so far (a file)
parser.add_argument("--read-stderr-at", type=int, default=-1)
args = parser.parse_args()

def rows(step: int) -> int:
    if args.recompile_at >= 0 and step >= args.recompile_at:
        return 8 + step - args.recompile_at + 1  # one more row each step: a new graph
    return 8


if args.compile_first:  # torch_xla compiles (and reads its debug settings) before the guard
    torch.ones(2, device=torch_xla.device()).sum().item()

guard = lazyscope.guard(max_recompiles=0, warmup_steps=2) if args.guard else \
    contextlib.nullcontext()
with guard:  # before the program's first use of the device, as lazyscope.trace()
    device = torch_xla.device()
    weight = torch.randn(16, 16).to(device)
    for step in range(args.steps):
        x = torch.randn(rows(step), 16)
        batch = x.to(device)  # the line to change: a new shape enters the device from step 20
        loss = (batch @ weight).relu().sum()
        time.sleep(args.sleep_ms / 1000)
        torch_xla.sync()
        print(f"step {step} done", flush=True)
        if step == args.read_stderr_at:
            with open("/proc/self/fd/2", encoding="utf-8", errors="replace") as err:
                said = [line for line in err if line.startswith("lazyscope: step")]
            print(f"stderr at step {step}: {said}", flush=True)
