"""The article's seed benchmark on a GPU: every attention variant, eval and train, eager and compile.

Each case is one ``lazyscope trace decoder --preset seed --device cuda`` in a fresh process; the
step time is the report's median after warm-up (CUDA synchronised at every step barrier).
A variant that is not installed here (flash-attn, xFormers) or that the backend cannot run is
printed as skipped with the reason the run recorded. Prints one table and the best variant
against the targets (H100: eval <= 35 ms, train <= 130 ms; the article's best: 42 / 159 ms).

    python benchmarks/gpu_seed.py --steps 30 --out runs/gpu-seed
    python benchmarks/gpu_seed.py --device cpu --preset tiny --steps 4 --variants sdpa-max,nested

Ratios and times come from this one run of the script; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: name -> decoder arguments (the article's variants; sdpa-causal when training, as the article)
VARIANTS: dict[str, list[str]] = {
    "sdpa-max": ["--attention", "sdpa", "--padding", "max"],
    "sdpa-longest": ["--attention", "sdpa", "--padding", "longest"],
    "sdpa-causal-longest": ["--attention", "sdpa-causal", "--padding", "longest"],
    "nested": ["--attention", "nested", "--padding", "longest"],
    "varlen": ["--attention", "varlen", "--padding", "longest"],
    "flex": ["--attention", "flex", "--padding", "longest"],
    "xformers": ["--attention", "xformers", "--padding", "longest"],
}
TARGET_MS = {"eval": 35.0, "train": 130.0}


def run_case(out: Path, backend: str, mode: str, variant: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "lazyscope", "trace", "--backend", backend,
           "--steps", str(args.steps), "--out", str(out), "--force", "--device", args.device,
           "decoder", "--preset", args.preset, "--mode", mode, "--autocast", args.autocast,
           *VARIANTS[variant]]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    rep = subprocess.run([sys.executable, "-m", "lazyscope", "report", str(out), "--format",
                          "json"], env=env, capture_output=True, text=True)
    if rep.returncode != 0:
        return {"status": "failed", "error": (proc.stderr or rep.stderr).strip()[-200:]}
    s = json.loads(rep.stdout)
    skipped = [n for n in s["notes"] if n.startswith("skipped:")]
    if skipped:
        return {"status": "skipped", "error": skipped[0][len("skipped: "):]}
    if proc.returncode != 0:
        return {"status": "failed", "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return {"status": "ok", "ms": (s["median_step_seconds"] or 0.0) * 1e3,
            "compiles": s["compiles"], "after_warmup": s["compiles_after_warmup"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--autocast", default="bf16", help="bf16 as the article; none for fp32")
    ap.add_argument("--out", type=Path, default=Path("runs/gpu-seed"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--backends", default="eager,compile")
    ap.add_argument("--modes", default="eval,train")
    args = ap.parse_args()
    best: dict[str, tuple[float, str]] = {}
    print(f"{'variant':<22} {'mode':<6} {'backend':<8} {'step ms':>9} {'compiles':>9}  note")
    for mode in args.modes.split(","):
        for variant in args.variants.split(","):
            for backend in args.backends.split(","):
                r = run_case(args.out / f"{variant}-{mode}-{backend}", backend, mode, variant, args)
                if r["status"] == "ok":
                    print(f"{variant:<22} {mode:<6} {backend:<8} {r['ms']:>9.1f} "
                          f"{r['compiles']:>5} ({r['after_warmup']} after warm-up)")
                    if mode not in best or r["ms"] < best[mode][0]:
                        best[mode] = (r["ms"], f"{variant} {backend}")
                else:
                    print(f"{variant:<22} {mode:<6} {backend:<8} {'-':>9} {'-':>9}  "
                          f"{r['status']}: {r['error']}")
    for mode, (ms, name) in best.items():
        if args.device != "cuda" or args.preset != "seed":
            print(f"best {mode}: {name} {ms:.1f} ms (not the H100 seed setting: no target)")
            continue
        print(f"best {mode}: {name} {ms:.1f} ms; target {TARGET_MS[mode]:.0f} ms -> "
              f"{ms / TARGET_MS[mode]:.2f}x the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
