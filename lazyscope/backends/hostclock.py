"""The host's clock of a run: the CPU the traced process used and how busy the machine was
with other processes, at sampled step barriers. ``lazyscope check --baseline`` compares these
where the wall clock cannot be trusted (a shared CI runner, another job on the machine).

A sample is ``[step, cpu_s, busy_s, wall_s]``: the steps done, the process's CPU seconds
(``time.process_time()``: every thread of it, the program's and XLA:CPU's compute threads, in
user and system mode), the machine's busy CPU seconds over all its CPUs (``/proc/stat``: every
process) and ``time.perf_counter()``. One sample when the trace starts (step 0), then one at a
barrier every ``every`` steps: 1 at first, doubled (and every other sample dropped) whenever
:data:`MAX_SAMPLES` are kept, so a run of any length keeps at most that many and a step between
two samples costs a comparison. A sample costs about 1.5 us; reading ``/proc/stat`` about 13 us
more, so ``busy_s`` is read at most every :data:`BUSY_EVERY_S` seconds (None in the samples
between, and where there is no ``/proc/stat``). Written into
``meta.info["host_clock"]`` (``{"cpus": N, "samples": [...]}``) when the run ends (and into the
info of a report of the run so far).

Measured on XLA:CPU here (60 steps of a 4-layer MLP, 2 cores): the median CPU time per step was
22.2 ms unloaded and 22.9 ms while two busy processes shared the cores, whose wall time per step
went from 22.2 ms to 74.9 ms; twice the work per step was 41.5 and 43.3 ms.
"""

from __future__ import annotations

import os
import time
from typing import Any

#: the most samples a run keeps
MAX_SAMPLES = 512
#: the key in ``meta.info``
HOST_CLOCK = "host_clock"
#: the shortest time between two reads of the machine's busy time
BUSY_EVERY_S = 0.25
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_seconds() -> float | None:
    """The machine's busy CPU seconds since boot, summed over its CPUs (``/proc/stat``'s first
    line: user, nice, system, irq, softirq, steal), None where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        ticks = [int(v) for v in fields[1:9]]
        busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
        return busy / _TICK
    except (OSError, ValueError, IndexError):
        return None


class HostClock:
    """Samples the host's clock at step barriers (a recorder's step hook)."""

    def __init__(self) -> None:
        self.every = 1
        self.samples: list[list[float | None]] = []
        self._busy_at = -1e18

    def _sample(self, step: int) -> None:
        now = time.perf_counter()
        busy = None
        if now - self._busy_at >= BUSY_EVERY_S:
            busy, self._busy_at = machine_busy_seconds(), now
        self.samples.append([step, time.process_time(), busy, now])

    def attach(self, recorder: Any) -> None:
        """Sample now (step 0) and at the recorder's barriers."""
        self._sample(0)
        recorder.step_hooks.append(self._on_step)

    def _on_step(self, index: int) -> None:
        if index % self.every:
            return
        self._sample(index)
        if len(self.samples) >= MAX_SAMPLES:
            self.every *= 2
            self.samples = [s for s in self.samples if int(s[0] or 0) % self.every == 0]

    def info(self) -> dict[str, Any]:
        """What goes into ``meta.info["host_clock"]`` (see the module docstring)."""
        return {"cpus": os.cpu_count() or 1, "samples": [list(s) for s in self.samples]}
