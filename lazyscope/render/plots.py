"""PNG plots (matplotlib, Agg). The only module that imports matplotlib."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazyscope.model import Run

TIMELINE_PNG = "timeline.png"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def figure(path: Path, *, ncols: int = 1, figsize: tuple[float, float] = (8, 4)
           ) -> Iterator[tuple[Any, Any]]:
    """A figure with ``ncols`` axes, saved to ``path`` as PNG on success and closed always."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, ncols, figsize=figsize, dpi=100)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def write_timeline(run: Run, path: Path | None = None) -> Path:
    """Step time per step, compilation steps marked: the LazyTensor blog's static vs dynamic
    picture. Returns the PNG's path (``RUN/timeline.png`` by default)."""
    path = Path(path) if path else run.path / TIMELINE_PNG
    with figure(path) as (fig, ax):
        xs = [s.index for s in run.steps]
        ys = [s.wall_s * 1e3 for s in run.steps]
        ax.plot(xs, ys, color="#1f77b4", marker=".", linewidth=1, label="step time")
        cx = [s.index for s in run.steps if s.compile_count]
        cy = [s.wall_s * 1e3 for s in run.steps if s.compile_count]
        if cx:
            ax.scatter(cx, cy, color="#d62728", marker="x", zorder=3, label="compiled in step")
        warm = run.meta.warmup_steps
        if run.steps and warm > 0:
            ax.axvspan(-0.5, warm - 0.5, color="#cccccc", alpha=0.4, label="warm-up")
        ax.set_xlabel("step")
        ax.set_ylabel("step time (ms)")
        if ys and max(ys) > 0 and min(y for y in ys if y > 0) > 0 and max(ys) / min(y for y in ys if y > 0) > 50:
            ax.set_yscale("log")
        title = run.meta.target + (" " + " ".join(run.meta.args) if run.meta.args else "")
        ax.set_title(f"{title}\n{len(cx)} of {len(xs)} steps compiled", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return path


TIME_SPLIT_PNG = "time_split.png"
CUMULATIVE_PNG = "cumulative.png"

#: the parts of a step in :func:`step_time_split`, bottom to top, with their colours
SPLIT_PARTS = (("compile", "#d62728"), ("execute", "#1f77b4"), ("transfer", "#ff7f0e"),
               ("host", "#7f7f7f"))


def step_time_split(run: Run) -> dict[str, list[float]]:
    """Seconds per step split into ``compile``, ``execute``, ``transfer`` (to + from device) and
    ``host`` (the rest of the step's wall time: Python, tracing, waiting; never negative)."""
    out: dict[str, list[float]] = {name: [] for name, _ in SPLIT_PARTS}
    for s in run.steps:
        transfer = s.to_device_s + s.from_device_s
        out["compile"].append(s.compile_s)
        out["execute"].append(s.execute_s)
        out["transfer"].append(transfer)
        out["host"].append(max(0.0, s.wall_s - s.compile_s - s.execute_s - transfer))
    return out


def write_time_split(run: Run, path: Path | None = None) -> Path:
    """Stacked bars per step: compile / execute / transfer / host time (ms). Returns the PNG's
    path (``RUN/time_split.png`` by default)."""
    path = Path(path) if path else run.path / TIME_SPLIT_PNG
    split = step_time_split(run)
    xs = [s.index for s in run.steps]
    with figure(path) as (fig, ax):
        bottom = [0.0] * len(xs)
        for name, colour in SPLIT_PARTS:
            ys = [v * 1e3 for v in split[name]]
            ax.bar(xs, ys, bottom=bottom, color=colour, width=0.8, label=name)
            bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("step")
        ax.set_ylabel("time (ms)")
        totals = {name: sum(v) for name, v in split.items()}
        wall = sum(totals.values()) or 1.0
        parts = ", ".join(f"{n} {totals[n] / wall:.0%}" for n, _ in SPLIT_PARTS)
        ax.set_title(f"where each step's time went ({parts})", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    return path


def write_cumulative(run: Run, path: Path | None = None) -> Path:
    """Cumulative wall time against step, with the compilation time inside it; compilation steps
    marked. Returns the PNG's path (``RUN/cumulative.png`` by default)."""
    path = Path(path) if path else run.path / CUMULATIVE_PNG
    with figure(path) as (fig, ax):
        xs, wall, comp = [], [], []
        tw = tc = 0.0
        for s in run.steps:
            tw += s.wall_s
            tc += s.compile_s
            xs.append(s.index)
            wall.append(tw)
            comp.append(tc)
        ax.plot(xs, wall, color="#1f77b4", marker=".", linewidth=1.5, label="wall time")
        ax.fill_between(xs, comp, color="#d62728", alpha=0.3, label="of which compiling")
        cx = [x for x, s in zip(xs, run.steps, strict=True) if s.compile_count]
        cy = [w for w, s in zip(wall, run.steps, strict=True) if s.compile_count]
        if cx:
            ax.scatter(cx, cy, color="#d62728", marker="x", zorder=3, label="compiled in step")
        ax.set_xlabel("step")
        ax.set_ylabel("cumulative time (s)")
        ax.set_title(f"{tw:.2f} s wall in {len(xs)} steps, {tc:.2f} s compiling", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return path
