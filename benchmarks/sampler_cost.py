"""What the stack sampler (``lazyscope.backends.sampler``) costs the program's thread, at
several rates, with both threads on one core (the worst case: every sample is a GIL handoff
and two context switches on the program's own core).

A pure-Python step (a recursive function called in a loop: Python's own work, as tracing is)
runs in blocks of ``--steps`` steps, one block with the sampler off and one with it on, in
alternating order, ``--rounds`` times. The sampler is lazyscope's own class, started before its
block and stopped after it, sharing one classification cache across blocks (as one trace has
one). The overhead is the median of the rounds' paired differences of the mean step, with a
95% bootstrap interval, as microseconds per step and as a share of the step. The rate that is
the default (``lazyscope.backends.sampler.sample_rate()``) must cost at most 1% of the step at
its interval's upper bound (the overhead target of ``overhead.py``), or the script exits 1.

    python benchmarks/sampler_cost.py [--rates 100 20 0] [--rounds 100] [--work 11000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the default rate's cost (the upper bound of its interval) must stay under this share
TARGET = 0.01


def step(n: int) -> int:
    def depth(d: int) -> int:
        return 0 if d == 0 else 1 + depth(d - 1)

    total = 0
    for i in range(n):
        total += depth(12) + i % 7
    return total


def block(steps: int, work: int) -> float:
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step(work)
        times.append(time.perf_counter() - t)
    return statistics.fmean(times[3:])


def measure(rate: float, rounds: int, steps: int, work: int) -> tuple[float, float, float,
                                                                      float]:
    """(untraced step s, overhead s per step, CI low, CI high)."""
    from lazyscope.backends.sampler import Sampler

    main = threading.get_ident()
    known: dict = {}
    diffs, base = [], []
    for r in range(rounds):
        result = {}
        for on in ((False, True) if r % 2 == 0 else (True, False)):
            sampler = Sampler(lambda: main, rate=rate) if on and rate > 0 else None
            if sampler is not None:
                sampler._user = known  # one trace classifies a code object once
                sampler.start()
            result[on] = block(steps, work)
            if sampler is not None:
                sampler.stop()
        diffs.append(result[True] - result[False])
        base.append(result[False])
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    return statistics.median(base), statistics.median(diffs), boot[50], boot[1949]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[100.0, 20.0, 0.0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--steps", type=int, default=40, help="steps per block (3 untimed)")
    ap.add_argument("--work", type=int, default=11000, help="calls per step (~6 ms)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from lazyscope.backends.sampler import sample_rate

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    default = sample_rate()
    print(f"the sampler on the program's core: {args.rounds} rounds of {args.steps} steps off "
          f"and on, alternating; the default rate {default:g}/s")
    ok = True
    for rate in args.rates:
        b, d, lo, hi = measure(rate, args.rounds, args.steps, args.work)
        mark = ""
        if rate == default:
            ok = hi / b <= TARGET
            mark = (f"  <- the default: at most {hi / b:+.2%}, target <= {TARGET:.0%} "
                    f"{'met' if ok else 'NOT met'}")
        print(f"  {rate:g}/s: step {b * 1e3:.2f} ms, {d * 1e6:+.1f} us per step "
              f"({d / b:+.2%}), 95% CI {lo * 1e6:+.1f}..{hi * 1e6:+.1f} us{mark}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
