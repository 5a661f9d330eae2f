"""Findings from where the step's time goes (:mod:`lazyscope.analyze.anatomy`): a loop that
waits for its data (*input-bound*) and a host that builds the step slower than the device runs
it (*host-bound*), each at the line to change, with the fix that fits what was measured.

* **input-bound**: the steady step waits for its next batch at least :data:`INPUT_SHARE` of its
  time (XProf's threshold for "input"). The line is the one that built the loader the loop
  waited on (followed to a ``TrainingArguments`` for a Hugging Face ``Trainer``'s own loader);
  the detail names the ``Dataset`` line the wait was sampled in, when the loader makes its
  batches in the loop's own thread. The fix follows the loader's settings: workers when it has
  none (as many as keep up with the measured time a batch takes against the rest of the step),
  more of them or a cheaper ``__getitem__`` when it has some, persistent and pinned where they
  are off, and on XLA torch_xla's ``MpDeviceLoader`` when the loop does not use it.
* **host-bound** (a device backend: XLA, or CUDA): the device idles for the host. On XLA the
  host's own part of the steady step (tracing) is longer than the graph's execution by at
  least :data:`HOST_SHARE` of the step and :data:`MIN_TRACING_IDLE_S`, over steady steps (a run
  whose steps all compiled is tracing new graphs: its recompile finding); on CUDA the host's
  part is at least
  :data:`CUDA_HOST_SHARE` of the step and the barrier found the GPU done (it waited less than
  :data:`IDLE_WAIT_SHARE` of the step). The line is the user line the
  sampler caught the host at most; the detail lists the most sampled lines. The fixes are the
  ones that exist for the backend (trace once with dynamo, scan repeated layers, more work per
  step; CUDA graphs).

Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lazyscope.analyze.anatomy import AnatomySection
from lazyscope.analyze.findings import Finding, HotLine, TimeFacts
from lazyscope.analyze.wording import say
from lazyscope.core import units
from lazyscope.model import Frame, Run, StepTable

#: the steady step's input share from which the loop is input-bound (XProf's threshold)
INPUT_SHARE = 0.10
#: the share of the steady step the device idles for the host (host time beyond the device's)
#: from which the loop is host-bound
HOST_SHARE = 0.15
#: CUDA: a barrier that waited less than this share of the step found the GPU idle
IDLE_WAIT_SHARE = 0.10
#: CUDA: ... and the host's share of the step is at least this
CUDA_HOST_SHARE = 0.5
#: sampled lines named in a finding
MAX_HOT = 3
#: a loader is suggested at most this many workers
MAX_WORKERS = 16
#: a part of the step that costs less than this a step is no finding, whatever its share
#: (a DataLoader worker's hand-over: nothing a fix removes)
MIN_PART_S = 0.002
#: XLA: the device idles less than this a step for the host: no finding. Tracing a model's
#: step with its optimizer costs milliseconds to tens of milliseconds of Python on any host
#: (the LazyTensor tax: a 4-layer scan_layers loop traces 30-65 ms a step on a busy 2-core
#: VM), which only a toy program cannot hide behind its device work; the anatomy still shows
#: it. A deep stack of small layers traces hundreds of milliseconds to seconds a step.
MIN_TRACING_IDLE_S = 0.1


def hot_lines(info_samples: dict[str, Any] | None, part: str) -> list[HotLine]:
    """The sampled user lines of ``part`` (the sampler's ``host``/``input`` phases), most
    sampled first."""
    if not isinstance(info_samples, dict):
        return []
    phase = {"input": "input", "host": "host"}[part]
    total = int((info_samples.get("phases") or {}).get(phase, 0) or 0)
    out = []
    for row in info_samples.get("lines") or []:
        if not isinstance(row, list) or len(row) < 5:
            continue
        p, file, line, function, n = row[:5]
        callee = str(row[5]) if len(row) > 5 else ""
        if p == phase and total and isinstance(n, int) and n > 0 and isinstance(line, int):
            out.append(HotLine(Frame(str(file), int(line), str(function)), n / total, n,
                               callee))
    return sorted(out, key=lambda h: -h.samples)


def host_work(callee: str) -> str:
    """What a host line's time is spent on, from the library function it called:
    ``optimizer`` (``torch.optim``), ``backward`` (autograd), ``model`` (a module's call), or
    ``other``."""
    if callee.startswith("torch.optim"):
        return "optimizer"
    if callee.startswith(("torch._tensor.backward", "torch.autograd")):
        return "backward"
    if callee.startswith("torch.nn.modules"):
        return "model"
    return "other"


def _waited_loader(loaders: Any) -> dict[str, Any] | None:
    """The loader the loop waited on most (by the step thread's time in its ``__next__``;
    else the one that yielded the most batches)."""
    if not isinstance(loaders, list):
        return None
    recs = [r for r in loaders if isinstance(r, dict)]
    if not recs:
        return None
    return max(recs, key=lambda r: (float(r.get("waited_s") or 0.0), int(r.get("batches") or 0)))


def _made_at(loader: dict[str, Any] | None) -> tuple[Frame | None, list[Frame]]:
    """The user frame that made a loader, and the user frames above it."""
    if loader is None:
        return None, []
    frames = []
    for row in loader.get("made_at") or []:
        try:
            file, line, function, library = row
        except (TypeError, ValueError):
            continue
        if not library:
            frames.append(Frame(str(file), int(line), str(function)))
    return (frames[0] if frames else None), frames


def _workers_needed(wait_s: float, rest_s: float, have: int) -> int:
    """Workers that make batches as fast as the rest of the step (``rest_s``) uses them, one
    more for slack. Without workers a batch takes what the loop waited (``wait_s``); ``have``
    workers that still keep the loop waiting make one batch each per ``have`` steps, so a
    batch takes ``have * (rest_s + wait_s)``."""
    if rest_s <= 0:
        return MAX_WORKERS
    batch_s = have * (rest_s + wait_s) if have else wait_s
    return int(min(MAX_WORKERS, max(2, have + 1, math.ceil(batch_s / rest_s) + 1)))


def input_finding(backend: str, section: AnatomySection, run: Run,
                  trainer_args: Frame | None = None,
                  loader_line: Frame | None = None) -> Finding | None:
    """The input-bound finding, or None when the loop does not wait for its data."""
    steady = section.steady
    share = steady.shares()["input"]
    if share < INPUT_SHARE or steady.input_s < MIN_PART_S:
        return None
    info = run.meta.run_info
    loader = _waited_loader(info.loaders)
    made, stack = _made_at(loader)
    if made is None:  # made before the trace began: the program's DataLoader(...) call
        made = loader_line
    hot = hot_lines(info.samples, "input")
    settings = loader or {}
    workers = int(settings.get("num_workers") or 0)
    rest = max(steady.wall_s - steady.input_s, 0.0)
    n = _workers_needed(steady.input_s, rest, workers)
    cuda = "cuda" in (run.meta.device or "")
    pin = ", pin_memory=True" if cuda and not settings.get("pin_memory") else ""
    persist = "" if settings.get("persistent_workers") else ", persistent_workers=True"
    where = made
    if trainer_args is not None and (made is None or _is_trainer_call(loader)):
        where = trainer_args
        fix = say(backend, "input_fix_trainer", n=n, pin=", dataloader_pin_memory=True"
                  if pin else "")
    elif workers == 0:
        fix = say(backend, "input_fix_workers", n=n, persist=persist, pin=pin,
                  batch=units.seconds(steady.input_s), rest=units.seconds(rest))
    else:
        sample = settings.get("sample_at")
        fix = say(backend, "input_fix_more_workers", have=workers, n=n,
                  s_have="" if workers == 1 else "s",
                  where=f"{sample[0]}:{sample[1]} ({sample[2]})" if sample else
                  "the dataset's __getitem__", persist=persist, pin=pin)
    if not info.parallel_loader and not trainer_args:
        fix += say(backend, "input_fix_device_loader")
    name = settings.get("dataset") or "its dataset"
    detail = say(backend, "input_detail", per_step=units.seconds(steady.input_s),
                 step=units.seconds(steady.wall_s), share=f"{share:.0%}",
                 loader=f"a DataLoader over {name} ({workers} worker"
                        f"{'' if workers == 1 else 's'})" if loader else "its data loader")
    if hot:
        detail += say(backend, "input_sampled", lines=_hot_text(hot))
    if where is None and hot:
        where = hot[0].at
    facts = TimeFacts("input", share, steady.input_s, steady.wall_s, section.steps,
                      hot=hot[:MAX_HOT], loader={k: v for k, v in settings.items()
                                                 if k not in ("varying", "shapes", "tokens",
                                                              "collate")} or None)
    file, line, function = (where.file, where.line, where.function) if where else ("", 0, "")
    frames = [where, *[f for f in stack if f != where]] if where else []
    return Finding("input_bound", file, line, function, frames, section.steps, [], 0,
                   steady.input_s * section.steps, detail, fix, facts)


def _is_trainer_call(loader: dict[str, Any] | None) -> bool:
    """The loader was made inside a library (a Trainer's ``get_train_dataloader``): the
    innermost frame of the stack that made it is not the user's."""
    rows = (loader or {}).get("made_at") or []
    first = rows[0] if rows else None
    return isinstance(first, list) and len(first) == 4 and bool(first[3])


def _hot_text(hot: list[HotLine]) -> str:
    return ", ".join(f"{h.at.file}:{h.at.line} ({h.at.function}) {h.share:.0%}"
                     for h in hot[:MAX_HOT])


def device_seconds(steps: StepTable, section: AnatomySection, lazy: bool,
                   mask: np.ndarray) -> float | None:
    """The device's own time per steady step: XLA's graph execution time where measured;
    elsewhere the time the barrier waited for the device (None when neither is)."""
    if lazy:
        col = steps.col("execute_s")
        if col is not None and mask.any() and np.isfinite(col[mask]).any():
            return float(np.nan_to_num(col[mask]).mean())
        return None
    return section.steady.device_s


def host_finding(backend: str, section: AnatomySection, run: Run, device_s: float | None,
                 cuda: bool, trainer: bool = False) -> Finding | None:
    """The host-bound finding, or None (see the module docstring)."""
    lazy = bool(run.meta.capabilities.lazy)
    if not (lazy or cuda) or device_s is None or section.basis != "steady":
        # too few steady steps: the steps averaged hold the program's start and its
        # compilations, not the host's share of a step
        return None
    if lazy and section.basis != "steady":
        # every step (but too few to time) compiled: the host's time is the tracing of new
        # graphs (dynamo's, a lowering's), which the recompile finding prices; no steady step
        # says what the loop's own tracing costs
        return None
    steady = section.steady
    share = steady.shares()["host"]
    if lazy:
        if (steady.host_s - device_s) < HOST_SHARE * steady.wall_s:
            return None
    elif share < CUDA_HOST_SHARE or steady.device_s > IDLE_WAIT_SHARE * steady.wall_s:
        return None
    idle = max(steady.host_s - device_s, 0.0) if lazy else steady.host_s
    if idle < (MIN_TRACING_IDLE_S if lazy else MIN_PART_S):
        return None
    hot = hot_lines(run.meta.run_info.samples, "host")
    files: dict[str, float] = {}
    for h in hot:
        files[h.at.file] = files.get(h.at.file, 0.0) + h.share
    detail = say(backend, "host_detail", per_step=units.seconds(steady.host_s),
                 step=units.seconds(steady.wall_s), share=f"{share:.0%}",
                 device=units.seconds(device_s), idle=units.seconds(idle))
    if hot:
        detail += say(backend, "host_sampled", lines=_hot_text(hot), files=", ".join(
            f"{f} {s:.0%}" for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:3]))
    where = hot[0].at if hot else None
    key = "host_fix" if backend != "compile" else "host_fix_compiled"
    if hot and host_work(hot[0].callee) == "optimizer":
        key = "host_fix_optimizer"
    elif trainer:
        key = "host_fix_trainer"
    facts = TimeFacts("host", share, steady.host_s, steady.wall_s, section.steps,
                      device_s=device_s, hot=hot[:MAX_HOT])
    file, line, function = (where.file, where.line, where.function) if where else ("", 0, "")
    return Finding("host_bound", file, line, function, [where] if where else [], section.steps,
                   [], 0, idle * section.steps, detail,
                   say(backend, key, where=f"{where.file}:{where.line}" if where else ""), facts)


def time_findings(backend: str, section: AnatomySection | None, run: Run, *,
                  trainer_args: Frame | None = None,
                  loader_line: Frame | None = None) -> list[Finding]:
    """The input-bound and host-bound findings of a run (see the module docstring)."""
    if section is None or not section.steps:
        return []
    from lazyscope.analyze.anatomy import anatomy_steps

    mask, _ = anatomy_steps(run.steps, run.meta.warmup_steps)
    lazy = bool(run.meta.capabilities.lazy)
    cuda = "cuda" in (run.meta.device or "")
    out = [input_finding(backend, section, run, trainer_args, loader_line),
           host_finding(backend, section, run, device_seconds(run.steps, section, lazy, mask),
                        cuda, trainer=trainer_args is not None)]
    return [f for f in out if f is not None]
