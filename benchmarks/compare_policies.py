"""Benchmark: the tiny decoder's padding policies on XLA, each in a fresh process.

    PJRT_DEVICE=CPU python benchmarks/compare_policies.py [--steps 40] [--out runs/bench-compare]

Runs ``lazyscope compare decoder --policies max,longest,pow2,bucket:auto,packed --steps 40
--preset tiny --mode train`` (lengths uniform in 1..255, batch 8) and prints, measured in this one
run: graphs per policy, real tokens/s including compilation and the ratios the issue asks for
(bucket:auto / longest >= 2, packed / longest >= 5, packed / max >= 1.5), padding efficiencies
(packed >= 0.9, max <= 0.6), each with PASS/FAIL. A few minutes of CPU: ``longest`` compiles one
graph per distinct batch length. Exit status 0 when every expectation holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lazyscope.compare import run_compare
from lazyscope.render.compare import COMPARE_PNG, render_compare_text, write_compare_png

POLICIES = ["max", "longest", "pow2", "bucket:auto", "packed"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-compare"))
    ap.add_argument("--max-buckets", type=int, default=8)
    args = ap.parse_args(argv)
    result = run_compare(
        "decoder", POLICIES, steps=args.steps, out=args.out, force=True,
        extra=["--preset", "tiny", "--mode", "train", "--max-buckets", str(args.max_buckets)],
        progress=lambda line: print(line, flush=True),
    )
    write_compare_png(result, args.out / COMPARE_PNG)
    print()
    print(render_compare_text(result))
    rows = {r["policy"]: r for r in result["rows"]}
    tps = {k: r["tokens_per_s"] for k, r in rows.items()}
    eff = {k: r["padding_efficiency"] or 0.0 for k, r in rows.items()}
    auto = rows["bucket:auto"]
    k = len(auto["buckets"] or [])
    graphs_per_shape = auto["distinct_graphs"] / max(1, auto["distinct_shapes"])
    checks = [
        (f"longest graphs {rows['longest']['distinct_graphs']} >= 20",
         rows["longest"]["distinct_graphs"] >= 20),
        (f"bucket:auto K={k} <= {args.max_buckets}, {auto['distinct_shapes']} shapes, "
         f"{auto['distinct_graphs']} graphs ({graphs_per_shape:.1f} per shape)",
         k <= args.max_buckets and auto["distinct_shapes"] <= k),
        (f"bucket:auto / longest = {tps['bucket:auto'] / tps['longest']:.2f}x >= 2",
         tps["bucket:auto"] >= 2 * tps["longest"]),
        (f"packed / longest = {tps['packed'] / tps['longest']:.2f}x >= 5",
         tps["packed"] >= 5 * tps["longest"]),
        (f"packed / max = {tps['packed'] / tps['max']:.2f}x >= 1.5",
         tps["packed"] >= 1.5 * tps["max"]),
        (f"padding efficiency packed = {eff['packed']:.2f} >= 0.9", eff["packed"] >= 0.9),
        (f"padding efficiency max = {eff['max']:.2f} <= 0.6", eff["max"] <= 0.6),
    ]
    print("expectations:")
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    print(f"\nruns, compare.json and compare.png in {args.out}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
