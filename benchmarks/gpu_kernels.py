"""Where a decoder step's GPU time goes, kernel by kernel: the seed benchmark's step run
untraced, under ``torch.profiler``.

It runs the built-in ``decoder`` scenario itself (``lazyscope_scenarios.decoder.main``, the
arguments after ``--``) without lazyscope tracing it: the scenario's step barrier (the
runtime's ``torch.cuda.synchronize()``) is wrapped to time each step with the host clock and to
step a ``torch.profiler`` schedule, which records the CUDA kernels of ``--active`` steps after
``--skip`` steps. It prints each step's wall time (an untraced cross-check of what
``lazyscope trace`` measures), then the profiled steps' kernel time per step by category
(matmul, attention, inductor's fused Triton kernels, copies, other), the GPU's idle time
within the step (wall minus kernel time: the host's batch, launches, waits), and the top
kernels. Kernels of one stream do not overlap, so their sum is the time the GPU was busy.

    python benchmarks/gpu_kernels.py --skip 5 --active 3 -- --backend compile --device cuda \\
        --preset seed --mode eval --autocast bf16 --attention varlen --padding longest \\
        --workers 2 --steps 10

Nothing is asserted; the figures are this one run's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: kernel name fragments -> category, first match wins (lower-cased names)
CATEGORIES = [
    ("attention", ("flash", "fmha", "attn", "attention", "flex", "varlen")),
    ("matmul", ("gemm", "cutlass", "cublas", "nvjet", "sm90_xmma", "matmul", "mm_")),
    ("copy", ("memcpy", "memset", "copy_", "to_copy")),
    ("triton (fused elementwise, norms, loss)", ("triton",)),
]


def category(name: str) -> str:
    low = name.lower()
    for cat, keys in CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", type=int, default=5, help="steps before the profiled ones")
    ap.add_argument("--active", type=int, default=3, help="steps profiled")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("scenario_args", nargs=argparse.REMAINDER)
    opts = ap.parse_args()
    argv = [a for a in opts.scenario_args if a != "--"]

    from torch.profiler import ProfilerActivity, profile, schedule

    from lazyscope.backends.pytorch.collector import EagerRuntime
    from lazyscope_scenarios.decoder import main as decoder_main

    walls: list[float] = []
    last = [time.perf_counter()]
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   schedule=schedule(wait=opts.skip - 1, warmup=1, active=opts.active,
                                     repeat=1))
    original = EagerRuntime.barrier

    def barrier(runtime: EagerRuntime) -> None:
        original(runtime)  # untraced: torch.cuda.synchronize()
        now = time.perf_counter()
        walls.append(now - last[0])
        prof.step()
        last[0] = time.perf_counter()  # the profiler's own work is not the next step's

    EagerRuntime.barrier = barrier  # type: ignore[method-assign]
    with prof:
        decoder_main(argv)
    EagerRuntime.barrier = original  # type: ignore[method-assign]

    active = walls[opts.skip:opts.skip + opts.active]
    print("step wall times (ms, untraced): " + " ".join(f"{w * 1e3:.1f}" for w in walls))
    if not active:
        print("no profiled step (fewer steps than --skip + --active)")
        return 1
    per_step = opts.active
    totals: dict[str, float] = defaultdict(float)
    kernels: dict[str, float] = defaultdict(float)
    for evt in prof.key_averages():
        us = getattr(evt, "self_device_time_total", None)
        if us is None:
            us = getattr(evt, "self_cuda_time_total", 0.0)
        if not us or str(getattr(evt, "device_type", "")).endswith("CPU"):
            continue
        totals[category(evt.key)] += us / 1e3 / per_step
        kernels[evt.key] += us / 1e3 / per_step
    wall = statistics.mean(active) * 1e3
    busy = sum(totals.values())
    print(f"profiled steps {opts.skip}..{opts.skip + opts.active - 1}: mean wall {wall:.1f} ms, "
          f"GPU busy {busy:.1f} ms ({busy / wall:.0%}), idle {wall - busy:.1f} ms")
    for cat, ms in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:<42} {ms:8.2f} ms/step  {ms / wall:5.1%} of the step")
    print(f"top {opts.top} kernels (ms/step):")
    for name, ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:opts.top]:
        print(f"  {ms:8.2f}  [{category(name)}] {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
