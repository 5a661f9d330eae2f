"""Two threads enter ``lazyscope.guard()`` at the same moment (a barrier releases them
together), each into its own ``out=`` run, each making 5 step barriers. Prints what each
guard ended with. One trace per process: one thread's guard records, the other is refused in
one line that names the thread holding the trace."""

from __future__ import annotations

import sys
import threading
import time

import torch

import lazyscope

start = threading.Barrier(2)
ended: dict[str, str] = {}


def work(name: str) -> None:
    start.wait()
    try:
        with lazyscope.guard(max_recompiles=0, backend="eager", out=f"run-{name}", force=True):
            for _ in range(5):
                torch.ones(3).sum()
                time.sleep(0.1)  # the other thread enters meanwhile
                lazyscope.barrier()
        ended[name] = "ok"
    except Exception as err:  # noqa: BLE001 - printed for the test
        ended[name] = f"{type(err).__name__}: {err}"


threads = [threading.Thread(target=work, args=(n,), name=f"worker-{n}") for n in ("a", "b")]
for t in threads:
    t.start()
for t in threads:
    t.join()
for name in sorted(ended):
    print(f"{name}: {ended[name]}")
sys.exit(0 if len(ended) == 2 else 1)
