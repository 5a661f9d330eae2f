"""Each step's measured parts, in seconds: the one cut of a step's wall time that the step
anatomy (:mod:`lazyscope.analyze.anatomy`, whose docstring defines the parts) and the
training time that throughput and the padding advice price (:func:`training_s`) share.

Pure: no I/O; below :mod:`~lazyscope.analyze.summary` (which the anatomy needs), so the
token counts can use it.
"""

from __future__ import annotations

import numpy as np

from lazyscope.model import Run, StepTable
from lazyscope.model.steps import INTERVAL_FIELDS


def seconds(steps: StepTable, name: str) -> np.ndarray:
    """A step column in seconds, 0 where not measured."""
    col = steps.col(name)
    return np.zeros(len(steps)) if col is None else np.nan_to_num(col, nan=0.0)


def step_parts(steps: StepTable, lazy: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every step's parts in seconds (``{part: array}``) and what the measured intervals
    exceed each step's wall time by (noise, 0 almost always)."""
    wall = seconds(steps, "wall_s")
    compile_s = seconds(steps, "compile_s")
    barrier = seconds(steps, "barrier_s")
    reads = seconds(steps, "sync_s")
    input_s = seconds(steps, "input_s")
    own = seconds(steps, "own_s")
    if lazy:  # compiled inside the barrier, else inside a read, else (rarely) elsewhere
        in_barrier = np.minimum(compile_s, barrier)
        in_reads = np.minimum(compile_s - in_barrier, reads)
        in_host = compile_s - in_barrier - in_reads
    else:
        in_barrier = in_reads = np.zeros(len(wall))
        in_host = compile_s
    device = barrier - in_barrier
    syncs = reads - in_reads
    rest = wall - input_s - barrier - reads - own - in_host
    host = np.maximum(rest, 0.0)
    over = np.maximum(-rest, 0.0)
    return ({"input": input_s, "host": host, "compile": compile_s, "device": device,
             "syncs": syncs, "other": own}, over)


def start_s(run: Run) -> float:
    """The program's start inside its first step: step 0's host part (:func:`step_parts`:
    its wall less its input, barrier, reads, compilations and lazyscope's own seconds):
    imports, building the model, a Trainer's set-up, the first trace. No padding policy
    changes it, and it varies by seconds from one run to the next (a cold disk cache, a busy
    machine), so throughput is measured without it. A compilation in that step is not part
    of it: under torch.compile the first graph compiles inside the program's first call, and
    a padding policy changes how many compile. 0 when the intervals were not measured."""
    steps = run.steps
    if not len(steps) or any(steps.col(f) is None for f in INTERVAL_FIELDS):
        return 0.0
    lazy = bool(run.meta.capabilities.lazy)
    return float(step_parts(steps, lazy)[0]["host"][0])


def training_s(run: Run) -> np.ndarray:
    """Each step's seconds of training, what a padding policy changes:
    :meth:`~lazyscope.model.StepTable.program_s` (lazyscope's own seconds out) with the
    program's start (:func:`start_s`) taken out of step 0."""
    out: np.ndarray = run.steps.program_s().copy()
    if len(out):
        out[0] = max(0.0, float(out[0]) - start_s(run))
    return out
