"""A small training loop run on every host of a simulated pod (tests/integration/test_pod.py).

Each process is one host (``CLOUD_TPU_TASK_ID``). ``--odd-host H --odd-step S``: host H feeds a
batch of another length from step S on (a graph the other hosts never compile); ``--hang-host
H --hang-at K``: host H writes ``--marker`` at step K and then sleeps (the test kills it);
``--fail-host H --fail-at K``: host H raises at step K; ``--sleep-ms``: each step sleeps that
long after its barrier (a run long enough to be watched)."""

import argparse
import os
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--odd-host", type=int, default=-1)
p.add_argument("--odd-step", type=int, default=6)
p.add_argument("--hang-host", type=int, default=-1)
p.add_argument("--hang-at", type=int, default=5)
p.add_argument("--marker", default="")
p.add_argument("--fail-host", type=int, default=-1)
p.add_argument("--fail-at", type=int, default=5)
p.add_argument("--sleep-ms", type=float, default=0)
args = p.parse_args()
host = int(os.environ.get("CLOUD_TPU_TASK_ID", "0"))

dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    if host == args.hang_host and step == args.hang_at:
        if args.marker:
            open(args.marker, "w").close()
        time.sleep(600)
    if host == args.fail_host and step == args.fail_at:
        raise RuntimeError(f"host {host} gave up at step {step}")  # the failing line
    rows = 8
    if host == args.odd_host and step >= args.odd_step:
        rows = 12
    x = torch.randn(rows, 16).to(dev)  # the batch: its length makes the graph
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    xm.mark_step()
    time.sleep(args.sleep_ms / 1000)
