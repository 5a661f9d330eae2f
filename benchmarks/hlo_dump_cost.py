"""What the recompile explanation costs at compile time: XLA's HLO dump (``--xla_dump_to``, the
source of each compiled graph's input shapes) is written while XLA compiles, so on a workload
that recompiles often it shows up as compile time, not as step time.

Runs the decoder with padding to each batch's longest sequence (a new graph at most steps) with
``lazyscope trace`` (default: shapes recorded) and ``lazyscope trace --no-graph-shapes`` (no
dump), alternating, each repetition a fresh process, and prints per mode: compilations, total and
per-compilation compile time (torch_xla's CompileTime metric), the median steady step, and
how many graphs' HLO the run kept and their size. Ratios are of medians over repetitions; no
asserts (the machine is noisy): compare the per-compilation ratio with 1.

    PJRT_DEVICE=CPU python benchmarks/hlo_dump_cost.py --reps 3 --steps 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from overhead import _env  # the sibling benchmark's environment (run as a script, like it)


def run_case(mode: str, rep: int, args: argparse.Namespace, tmp: Path) -> dict:
    env = _env()
    out = tmp / f"{mode}-{rep}"
    flags = ["--no-graph-shapes"] if mode == "no-shapes" else []
    cmd = [sys.executable, "-m", "lazyscope", "trace", *flags, "--out", str(out),
           "decoder", "--preset", args.preset, "--padding", "longest", "--steps", str(args.steps),
           "--batch", str(args.batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"hlo_dump_cost: {mode} failed:\n{proc.stderr[-2000:]}")
    report = subprocess.run([sys.executable, "-m", "lazyscope", "report", str(out), "--format",
                             "json"], capture_output=True, text=True, env=env, check=True)
    summary = json.loads(report.stdout)
    graphs = list((out / "graphs").glob("*.hlo.txt")) if (out / "graphs").is_dir() else []
    return {"compiles": summary["compiles"], "compile_s": summary["compile_seconds"],
            "median_step_s": summary["median_step_seconds"], "kept": len(graphs),
            "kept_bytes": sum(g.stat().st_size for g in graphs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--preset", default="tiny")
    args = parser.parse_args(argv)
    modes = ("shapes", "no-shapes")
    results: dict[str, list[dict]] = {m: [] for m in modes}
    print(f"workload: decoder --preset {args.preset} --padding longest, batch {args.batch}, "
          f"{args.steps} steps; {args.reps} repetitions per mode, alternating, fresh processes")
    with tempfile.TemporaryDirectory(prefix="lazyscope-hlo-cost-") as tmp:
        for rep in range(args.reps):
            for mode in (modes if rep % 2 == 0 else modes[::-1]):
                r = run_case(mode, rep, args, Path(tmp))
                results[mode].append(r)
                print(f"  rep {rep} {mode:<9} compiles {r['compiles']:>3}  compile "
                      f"{r['compile_s']:7.2f} s  median step {r['median_step_s'] * 1e3:8.1f} ms  "
                      f"kept {r['kept']} graphs, {r['kept_bytes'] / 1024:.0f} KiB", flush=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    per = {m: statistics.median(r["compile_s"] / max(r["compiles"], 1) for r in results[m])
           for m in modes}
    print()
    print(f"compilations:               shapes {sorted({r['compiles'] for r in results['shapes']})}"
          f", no-shapes {sorted({r['compiles'] for r in results['no-shapes']})}")
    print(f"compile time per graph:     {per['shapes'] * 1e3:.1f} ms with the HLO dump vs "
          f"{per['no-shapes'] * 1e3:.1f} ms without ({per['shapes'] / per['no-shapes']:.3f}x)")
    print(f"total compile time:         {med('shapes', 'compile_s'):.2f} s vs "
          f"{med('no-shapes', 'compile_s'):.2f} s "
          f"({med('shapes', 'compile_s') / med('no-shapes', 'compile_s'):.3f}x)")
    print(f"median step:                {med('shapes', 'median_step_s') * 1e3:.1f} ms vs "
          f"{med('no-shapes', 'median_step_s') * 1e3:.1f} ms")
    print(f"kept in the run (graphs/):  {med('shapes', 'kept'):.0f} graphs, "
          f"{med('shapes', 'kept_bytes') / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
