"""What the recompile-explanation source costs: torch_xla's IR dump (XLA_SAVE_TENSORS_FILE, read
and truncated at every barrier the way the collector does) and the whole lazyscope trace, vs
untraced, on the LazyTensor blog's step and a small decoder-like training step. Each case runs in
its own process; prints median step times after warm-up and their ratios (no asserts).

    PYTHONPATH=. PJRT_DEVICE=CPU python benchmarks/graph_dump_overhead.py --steps 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DRIVER = r"""
import json, os, statistics, sys, time
mode, model, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
import torch, torch_xla
reader = None
if mode == "dump":
    from lazyscope.backends.xla_graphs import GraphDumpReader
    reader = GraphDumpReader(os.environ["XLA_SAVE_TENSORS_FILE"], truncate=True)
tracer = None
if mode == "traced":
    import lazyscope
    tracer = lazyscope.trace(out).__enter__()
dev = torch_xla.device()
torch.manual_seed(0)
if model == "lazytensor":
    x = torch.rand(512, 8).to(dev); y = torch.rand(512, 512).to(dev)
    def step():
        global loss
        loss = torch.einsum("bs,st->bt", y, x).sum().view(1)
else:
    layer = torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, 2).to(dev)
    head = torch.nn.Linear(128, 128).to(dev)
    opt = torch.optim.AdamW(list(net.parameters()) + list(head.parameters()), lr=1e-3)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(64).to(dev)
    def step():
        xb = torch.randn(8, 64, 128).to(dev)
        loss = head(net(xb, mask=mask, is_causal=True)).pow(2).mean()
        loss.backward(); opt.step(); opt.zero_grad()
times = []
for i in range(steps):
    tic = time.perf_counter()
    step()
    torch_xla.sync()
    if reader is not None:
        reader.read_new()
    torch_xla._XLAC._xla_wait_device_ops([])
    times.append(time.perf_counter() - tic)
if tracer is not None:
    tracer.__exit__(None, None, None)
print("RESULT " + json.dumps({"median_s": statistics.median(times[3:])}))
"""


def run_case(mode: str, model: str, steps: int, tmp: Path) -> float:
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if mode == "dump":
        env["XLA_SAVE_TENSORS_FILE"] = str(tmp / f"{model}-graphs.txt")
        env["XLA_SAVE_TENSORS_FMT"] = "text"
    out = tmp / f"{model}-{mode}-run"
    proc = subprocess.run([sys.executable, "-c", DRIVER, mode, model, str(steps), str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return float(json.loads(line[7:])["median_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--models", default="lazytensor,decoder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            t = {m: run_case(m, model, args.steps, Path(tmp)) for m in ("plain", "dump", "traced")}
            print(f"{model:11s} median step: untraced {t['plain'] * 1e3:.2f} ms, "
                  f"IR dump {t['dump'] * 1e3:.2f} ms ({t['dump'] / t['plain']:.2f}x), "
                  f"full lazyscope trace {t['traced'] * 1e3:.2f} ms "
                  f"({t['traced'] / t['plain']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
