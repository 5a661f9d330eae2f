"""PNG plots (matplotlib, Agg) of a report's per-step series. The only module that imports
matplotlib.

Every plot draws :class:`~lazyscope.analyze.report.Series`, which is bucketed to at most a few
thousand points (a bucket shows its mean, with its min..max as a band): a million-step run draws
as fast as a short one. Legends have a fixed place (the ``best`` search is quadratic in the
points).

Text that comes from the program (the script's path and arguments, policy names) is drawn
literally: it is given ``parse_math=False`` (:data:`LITERAL`), text by text, so ``$\\foo$`` in an
argument is never mathtext. Everything of lazyscope's own keeps matplotlib's mathtext on, which
its own formatters need: a log axis labels its ticks ``$\\mathdefault{10^{3}}$``, drawn as 10³
(with mathtext off globally they read as that raw string).
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lazyscope.analyze.series import Series
from lazyscope.core.errors import one_line
from lazyscope.store.layout import CUMULATIVE_PNG, TIME_SPLIT_PNG, TIMELINE_PNG

if TYPE_CHECKING:  # not imported: a plotter process draws without the analysis
    from lazyscope.analyze.compare import CompareRow, Comparison
    from lazyscope.analyze.report import Report

#: below this many points the time split is drawn as bars, above as stacked areas
MAX_BARS = 120

#: keyword arguments of a Text that holds program text: drawn as it is, never as mathtext
LITERAL = {"parse_math": False}
#: the default figure's size, in inches
FIGSIZE = (8.0, 4.0)
#: the comparison's figure (two axes side by side)
COMPARE_FIGSIZE = (11.0, 4.2)
#: characters of a title line at the titles' size (9 pt) per inch of figure width (90 across
#: the default figure's 8 inches)
TITLE_CHARS_PER_INCH = 11.25

#: the parts of a step in :func:`step_time_split`, bottom to top, with their colours: the
#: step anatomy's where the run measured it, else what the backend's counters give
ANATOMY_PARTS = (("input", "#9467bd"), ("host", "#7f7f7f"), ("compile", "#d62728"),
                 ("device", "#1f77b4"), ("syncs", "#ff7f0e"), ("other", "#bcbd22"))
SPLIT_PARTS = (("compile", "#d62728"), ("execute", "#1f77b4"), ("transfer", "#ff7f0e"),
               ("host", "#7f7f7f"))


def split_parts(report: Report | PlotData) -> tuple[tuple[str, str, str], ...]:
    """(part, label, colour) of each part :func:`step_time_split` gives, bottom to top."""
    series = plot_data(report).series
    if series.parts is not None:
        return tuple((n, series.host_label if n == "host" else n, c) for n, c in ANATOMY_PARTS)
    return tuple((n, n, c) for n, c in SPLIT_PARTS)


def _matplotlib() -> Any:
    """matplotlib, its figures drawn by Agg without pyplot (no figure manager, no GUI backend
    chosen; pyplot's import alone is ~60 ms)."""
    import matplotlib

    return matplotlib


def import_matplotlib() -> None:
    """Import what :func:`new_figure` uses (a plotter process does it before it is asked)."""
    from matplotlib import figure as _figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401


def new_figure(figsize: tuple[float, float]) -> Any:
    """A Figure on an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


@contextlib.contextmanager
def figure(path: Path, *, ncols: int = 1, figsize: tuple[float, float] = FIGSIZE
           ) -> Iterator[tuple[Any, Any]]:
    """A figure with ``ncols`` axes, saved to ``path`` as PNG on success. Program text in it
    must be given :data:`LITERAL` (see the module docstring)."""
    with _matplotlib().rc_context({"text.usetex": False}):
        fig = new_figure(figsize)
        axes = fig.subplots(1, ncols)
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path)


def wrapped(text: str, inches: float = FIGSIZE[0]) -> str:
    """A title that comes from the program (a script's path and arguments, at most 160
    characters) on as many lines as a figure ``inches`` wide needs, never past its edges."""
    return "\n".join(textwrap.wrap(text, int(TITLE_CHARS_PER_INCH * inches))) or text


@dataclass
class PlotData:
    """What the run's plots draw, from its report: the bucketed series (a few thousand points
    at most) and the numbers of their titles; small enough to hand to a plotter process."""

    series: Series
    #: the target and its arguments, printable (an argument that is not UTF-8 is written
    #: ``\\xff``: matplotlib cannot draw a lone surrogate), and not too long for a title
    title: str
    steps: int
    #: steps with a compilation
    compiled: int


def plot_data(report: Report | PlotData) -> PlotData:
    """The report's :class:`PlotData`; a report read back from JSON has no series (it is built
    from a run): ValueError."""
    if isinstance(report, PlotData):
        return report
    if report.series is None:
        raise ValueError("this report has no per-step series to draw (build it from the run)")
    s = report.summary
    return PlotData(series=report.series,
                    title=one_line(s.target + (" " + " ".join(s.args) if s.args else ""), 160),
                    steps=s.steps,
                    compiled=int(np.count_nonzero(report.steps.values("compile_count"))))


def _x(series: Series) -> np.ndarray:
    return np.asarray(series.step + (series.size - 1) / 2.0)


def write_timeline(report: Report | PlotData, path: Path) -> Path:
    """Step time per step, compilation steps marked: the LazyTensor blog's static vs dynamic
    picture. Bucketed runs show each bucket's mean with its min..max band."""
    data = plot_data(report)
    series = data.series
    with figure(path) as (_fig, ax):
        xs = _x(series)
        ys = series.wall_mean * 1e3
        ax.plot(xs, ys, color="#1f77b4", marker="." if len(xs) <= 200 else None,
                linewidth=1, label="step time" + (" (bucket mean)" if series.bucketed else ""))
        if series.bucketed:
            ax.fill_between(xs, series.wall_min * 1e3, series.wall_max * 1e3, color="#1f77b4",
                            alpha=0.2, label="bucket min..max")
        compiled = series.compiles > 0
        if compiled.any():
            ax.scatter(xs[compiled], (series.wall_max if series.bucketed else ys / 1e3)[compiled]
                       * 1e3, color="#d62728", marker="x", zorder=3, label="compiled in step")
        ax.set_xlabel("step")
        ax.set_ylabel("step time (ms)")
        positive = ys[ys > 0]
        if len(positive) and positive.max() / positive.min() > 50:
            ax.set_yscale("log")
        ax.set_title(f"{wrapped(data.title)}\n{data.compiled} of {data.steps} steps compiled",
                     fontsize=9, **LITERAL)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    return Path(path)


def step_time_split(report: Report | PlotData) -> dict[str, np.ndarray]:
    """Seconds per point of the series split into the step anatomy's parts (input, host,
    compile, device, syncs, other: every one measured, :mod:`lazyscope.analyze.anatomy`);
    for a run that did not measure them, into ``compile``, ``execute``, ``transfer`` (to + from
    device) and ``host`` (the rest of the wall time: Python, tracing, waiting; never
    negative), a part the backend does not measure zero (and ``host`` absorbs it)."""
    series = plot_data(report).series
    if series.parts is not None:
        return {n: series.parts[n] for n, _ in ANATOMY_PARTS}
    wall = series.wall_mean * series.size
    zeros = np.zeros(len(wall))
    execute = series.execute_s if series.execute_s is not None else zeros
    transfer = series.transfer_s if series.transfer_s is not None else zeros
    host = np.maximum(0.0, wall - series.compile_s - execute - transfer)
    return {"compile": series.compile_s, "execute": execute, "transfer": transfer, "host": host}


def write_time_split(report: Report | PlotData, path: Path) -> Path:
    """Compile / execute / transfer / host time per step (ms): stacked bars for short runs,
    stacked areas per bucket for long ones."""
    data = plot_data(report)
    split = step_time_split(data)
    series = data.series
    xs = _x(series)
    per = np.maximum(series.size, 1)
    parts = split_parts(data)
    with figure(path) as (_fig, ax):
        if len(xs) <= MAX_BARS:
            bottom = np.zeros(len(xs))
            for name, label, colour in parts:
                ys = split[name] / per * 1e3
                ax.bar(xs, ys, bottom=bottom, color=colour, width=0.8 * per, label=label)
                bottom = bottom + ys
        else:
            ax.stackplot(xs, *[split[n] / per * 1e3 for n, _, _ in parts],
                         colors=[c for _, _, c in parts], labels=[lb for _, lb, _ in parts])
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("step")
        ax.set_ylabel("time per step (ms)")
        positive = (split[parts[0][0]] * 0 + sum(split.values())) / per * 1e3
        positive = positive[positive > 0]
        if len(positive) and positive.max() / positive.min() > 8:  # warm-up dwarfs the rest
            ax.set_yscale("symlog", linthresh=max(float(np.median(positive)), 1e-3))
        totals = {name: float(v.sum()) for name, v in split.items()}
        wall = sum(totals.values()) or 1.0
        text = ", ".join(f"{lb} {totals[n] / wall:.0%}" for n, lb, _ in parts
                         if totals[n] / wall >= 0.005)
        ax.set_title(f"where each step's time went ({text})", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8, loc="upper right")
    return Path(path)


def write_cumulative(report: Report | PlotData, path: Path) -> Path:
    """Cumulative wall time against step, with the compilation time inside it."""
    data = plot_data(report)
    series = data.series
    with figure(path) as (_fig, ax):
        xs = series.step + series.size - 1
        wall = series.cumulative_s
        comp = np.cumsum(series.compile_s)
        ax.plot(xs, wall, color="#1f77b4", marker="." if len(xs) <= 200 else None,
                linewidth=1.5, label="wall time")
        ax.fill_between(xs, comp, color="#d62728", alpha=0.3, label="of which compiling")
        compiled = series.compiles > 0
        if compiled.any() and len(xs) <= 200:
            ax.scatter(xs[compiled], wall[compiled], color="#d62728", marker="x", zorder=3,
                       label="compiled in step")
        ax.set_xlabel("step")
        ax.set_ylabel("cumulative time (s)")
        total_wall = float(wall[-1]) if len(wall) else 0.0
        total_comp = float(comp[-1]) if len(comp) else 0.0
        ax.set_title(f"{total_wall:.2f} s wall in {data.steps} steps, "
                     f"{total_comp:.2f} s compiling", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    return Path(path)


#: file name -> (caption, writer), in the order the HTML report shows them
PLOTS = {
    TIMELINE_PNG: ("step time, compilations marked", write_timeline),
    TIME_SPLIT_PNG: ("where each step's time went (the step anatomy: input, host or tracing, "
                     "compile, device, syncs, other; older runs: compile, execute, transfer, host)",
                     write_time_split),
    CUMULATIVE_PNG: ("cumulative wall time", write_cumulative),
}


# ------------------------------------------------------------------------------ compare


def efficiency_text(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def compiles_text(n: int) -> str:
    return f"{n} compile" + ("" if n == 1 else "s")


def row_label(r: CompareRow) -> str:
    return r.policy + (f" ({r.resolved})" if r.resolved else "")


def write_compare_png(result: Comparison, path: Path) -> Path:
    """Bars of real tokens/s (including compilation) per policy, and the real tokens each policy
    had processed against wall time (comparisons of the previous release, without per-step
    tokens: wall time against step). Returns ``path``."""

    rows = result.rows
    with figure(path, ncols=2, figsize=COMPARE_FIGSIZE) as (fig, (ax1, ax2)):
        names = [row_label(r) for r in rows]
        tps = [r.tokens_per_s for r in rows]
        colors = _matplotlib().rcParams["axes.prop_cycle"].by_key()["color"]
        bars = ax1.bar(range(len(rows)), tps,
                       color=[colors[i % len(colors)] for i in range(len(rows))])
        for bar, r in zip(bars, rows, strict=True):
            ax1.annotate(f"{compiles_text(r.compiles)}\neff {efficiency_text(r.padding_efficiency)}",
                         (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         ha="center", va="bottom", fontsize=7)
        ax1.set_xticks(range(len(rows)), names, rotation=20, fontsize=8, **LITERAL)
        ax1.set_ylabel("real tokens/s (including compilation)")
        ax1.margins(y=0.2)
        ax1.grid(axis="y", alpha=0.3)
        for i, r in enumerate(rows):
            xs: tuple[float, ...] = r.cumulative_wall_s
            ys: tuple[float, ...] = (tuple(float(t) for t in r.cumulative_tokens)
                                     if len(r.cumulative_tokens) == len(xs) else ())
            if not ys:  # a comparison of the previous release: wall time against step
                xs, ys = tuple(float(i) for i in range(len(xs))), xs
            ax2.plot(xs, ys, label=row_label(r), color=colors[i % len(colors)],
                     marker=".", markersize=3, linewidth=1.2)
        tokens = all(len(r.cumulative_tokens) == len(r.cumulative_wall_s) for r in rows)
        ax2.set_xlabel("wall time (s, compilation included)" if tokens else "step")
        ax2.set_ylabel("real tokens processed" if tokens else "cumulative wall time (s)")
        ax2.grid(alpha=0.3)
        for text in ax2.legend(fontsize=8, loc="upper left").get_texts():  # policy names
            text.set_parse_math(False)
        per = "backend x policy" if result.backends else "policy"
        fig.suptitle(wrapped(f"{result.scenario} {' '.join(result.args)}: "
                             f"{result.steps} steps per {per}", COMPARE_FIGSIZE[0]),
                     fontsize=9, **LITERAL)
    return Path(path)
