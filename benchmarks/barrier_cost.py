"""What lazyscope's work at a step barrier costs inside a real training loop, part by part.

The small MLP loop of ``overhead.py`` (hidden 512, 3 layers, batch 128, batches already on the
device, one ``torch_xla.sync()`` per step) runs under ``lazyscope.trace()``; after a warm-up,
each part of the XLA backend's barrier work is wrapped with a ``perf_counter`` timer and the
loop runs ``--steps`` more steps. Printed: the step time and each part's wall time per step,
and lazyscope's whole work per step: ``torch_xla.sync()`` as the program sees it (lazyscope's
wrapper) minus torch_xla's own sync inside it (the timers' own cost included). Then the same parts are called back to back with the device idle (no step in flight), ``--calls``
times each, for comparison: the difference is what the loop's state (a step just launched, the
main thread busy with torch_xla's own sync) does to the same work.

    PJRT_DEVICE=CPU python benchmarks/barrier_cost.py --steps 400
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARTS = ("_on_barrier", "_collect_step", "_watch_results", "_compile_events", "_eager_mode",
         "_note_device")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400, help="timed steps of the loop")
    ap.add_argument("--calls", type=int, default=2000, help="idle calls of each part")
    args = ap.parse_args(argv)
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    sys.path.insert(0, str(REPO))
    import lazyscope

    out = Path(tempfile.mkdtemp(prefix="lazyscope-barrier-")) / "run"
    tracer = lazyscope.trace(out, force=True)
    tracer.__enter__()
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    from lazyscope.backends.xla.metrics import Metrics

    measuring = [False]
    torch.manual_seed(0)
    dev = torch_xla.device()
    layers: list[torch.nn.Module] = []
    for _ in range(3):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = [(torch.randn(128, 512).to(dev), torch.randint(0, 10, (128,)).to(dev))
               for _ in range(4)]

    def train_step(i: int) -> None:
        x, y = batches[i % len(batches)]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        t = time.perf_counter()
        torch_xla.sync()
        if measuring[0]:
            spent["sync as the program sees it"] += time.perf_counter() - t

    for i in range(8):
        train_step(i)
    xm.wait_device_ops()

    collector = tracer.collector
    spent: collections.Counter[str] = collections.Counter()

    def timed(obj: object, name: str, label: str) -> None:
        fn = getattr(obj, name)

        def wrapper(*a: object, **k: object) -> object:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.perf_counter() - t
        setattr(obj, name, wrapper)

    for name in PARTS:
        timed(collector, name, name)
    timed(collector._recorder, "step", "recorder.step")
    timed(collector._lines, "after_step", "source lines")
    # the debug file: a mark per barrier, a read every few dozen (their events and kept text)
    timed(collector._debug, "mark", "debug file: mark")
    timed(collector._debug, "take_steps", "debug file: read")
    timed(collector._recorder, "event", "recorder.event")
    timed(collector._recorder, "keep_text", "recorder.keep_text")
    # torch_xla's own sync, as lazyscope's wrapper calls it: the original it is handed, timed
    wrapped_sync = collector._sync

    def sync_timing_original(original: object, *a: object, **k: object) -> object:
        def timed_original(*a2: object, **k2: object) -> object:
            t = time.perf_counter()
            try:
                return original(*a2, **k2)  # type: ignore[operator]
            finally:
                spent["torch_xla's sync"] += time.perf_counter() - t
        return wrapped_sync(timed_original, *a, **k)

    collector._sync = sync_timing_original  # type: ignore[method-assign]
    reader_cls = Metrics
    take = reader_cls.take
    timed(reader_cls, "take", "metric reads")
    measuring[0] = True
    tic = time.perf_counter()
    for i in range(args.steps):
        train_step(i)
    xm.wait_device_ops()
    step = (time.perf_counter() - tic) / args.steps
    in_loop = {k: v / args.steps for k, v in spent.items()}

    measuring[0] = False
    reader_cls.take = take  # type: ignore[method-assign]
    idle: dict[str, float] = {}
    reader = collector._last
    values, _ = collector._collect_step()
    for label, call in (("metric reads", reader.take),
                        ("_collect_step", collector._collect_step),
                        ("recorder.step", lambda: collector._recorder.step(values)),
                        ("_on_barrier", lambda: collector._on_barrier(0.0))):
        call()
        t = time.perf_counter()
        for _ in range(args.calls):
            call()
        idle[label] = (time.perf_counter() - t) / args.calls
    tracer.__exit__(None, None, None)

    print(f"step {step * 1e3:.2f} ms ({args.steps} steps under lazyscope.trace())")
    print(f"{'part':22s} {'in the loop':>14s} {'idle device':>14s}")
    for label, seconds in sorted(in_loop.items(), key=lambda kv: -kv[1]):
        cold = f"{idle[label] * 1e6:11.1f} us" if label in idle else ""
        print(f"{label:22s} {seconds * 1e6:11.1f} us {cold:>14s}")
    ours = in_loop["sync as the program sees it"] - in_loop["torch_xla's sync"]
    print(f"lazyscope's work in the loop (its sync wrapper, the barrier included): "
          f"{ours * 1e6:.0f} us per step = {ours / step * 100:.2f}% of the step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
