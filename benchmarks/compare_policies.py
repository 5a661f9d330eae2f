"""Benchmark: padding policies on XLA, each in a fresh process, and the advisor's ``auto`` beside
them.

    PJRT_DEVICE=CPU python benchmarks/compare_policies.py [--scenario decoder|hf-gpt2]
        [--lengths uniform|lognormal] [--steps 40] [--policies ...] [--out runs/bench-compare]

Runs ``lazyscope compare --policies max,pow2,bucket:auto,packed,auto --steps 40 SCENARIO
--preset tiny`` on uniform lengths (1..max-1) or on a skewed lengths file written here
(lognormal, median max/6.5, p99 about 0.94*max: the issue's 39 / 240 of 256, scaled to the
preset's max length; seeded), and prints, measured in this one run: the table, real tokens/s
including compilation, and PASS/FAIL for the expectations: ``auto`` within 10% of the best
policy's real tokens/s; packed rows >= 0.9 padding efficiency; packed beats max. A few minutes of
CPU per scenario. Exit status 0 when every expectation holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

from lazyscope.commands.cases import parse_policies, run_compare
from lazyscope.render.compare import render_compare_text
from lazyscope.render.plots import write_compare_png
from lazyscope.store.layout import COMPARE_PNG

POLICIES = "max,pow2,bucket:auto,packed,auto"
MAX_LEN = {"decoder": 256, "hf-gpt2": 128}  # the tiny presets' max length


def lognormal_file(path: Path, max_len: int, n: int = 4000, seed: int = 23) -> Path:
    """``n`` lengths, lognormal with median ``max_len / 6.5`` and sigma 0.78, clipped to
    1..max_len-1, one per line."""
    rng = random.Random(seed)
    median = max_len / 6.5
    values = [min(max_len - 1, max(1, round(rng.lognormvariate(math.log(median), 0.78))))
              for _ in range(n)]
    path.write_text("\n".join(map(str, values)) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", choices=sorted(MAX_LEN), default="decoder")
    ap.add_argument("--lengths", choices=["uniform", "lognormal"], default="uniform")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-compare"))
    args = ap.parse_args(argv)
    extra = ["--preset", "tiny", "--mode", "train"]
    if args.lengths == "lognormal":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        file = lognormal_file(args.out.with_name(args.out.name + "-lengths.txt"),
                              MAX_LEN[args.scenario])
        extra += ["--lengths", str(file)]
    result = run_compare(args.scenario, parse_policies(args.policies), steps=args.steps,
                         out=args.out, force=True, extra=extra,
                         progress=lambda update: update.state != "running"
                         and print(update.line, flush=True))
    write_compare_png(result, args.out / COMPARE_PNG)
    print()
    print(render_compare_text(result))
    rows = {r.policy: r for r in result.rows if r.ok}
    checks = []
    best = max(rows.values(), key=lambda r: r.tokens_per_s) if rows else None
    if "auto" in rows and best is not None:
        auto = rows["auto"]
        checks.append((f"auto ({auto.resolved}) / best ({best.policy}) = "
                       f"{auto.tokens_per_s / best.tokens_per_s:.2f} >= 0.90",
                       auto.tokens_per_s >= 0.9 * best.tokens_per_s))
    if "packed" in rows:
        eff = rows["packed"].padding_efficiency or 0.0
        checks.append((f"padding efficiency packed = {eff:.2f} >= 0.9", eff >= 0.9))
        if "max" in rows:
            ratio = rows["packed"].tokens_per_s / rows["max"].tokens_per_s
            checks.append((f"packed / max = {ratio:.2f}x > 1", ratio > 1))
    print("expectations:")
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    if not checks:
        print("  none for these policies (auto and packed have expectations)")
    print(f"\nruns, compare.json and compare.png in {args.out}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
