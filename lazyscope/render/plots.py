"""PNG plots (matplotlib, Agg). The only module that imports matplotlib."""

from __future__ import annotations

from pathlib import Path

from lazyscope.model import Run

TIMELINE_PNG = "timeline.png"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_timeline(run: Run, path: Path | None = None) -> Path:
    """Step time per step, compilation steps marked: the LazyTensor blog's static vs dynamic
    picture. Returns the PNG's path (``RUN/timeline.png`` by default)."""
    plt = _pyplot()
    path = Path(path) if path else run.path / TIMELINE_PNG
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    try:
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
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
