"""The files a run directory shows itself with: the one place that writes views.

``write_views(report, run_dir)`` writes the PNG plots (``timeline.png``, ``time_split.png``,
``cumulative.png``), ``report.html`` (the plots inline) and, when TensorBoard is installed, the
per-step scalars under ``tensorboard/``. ``notebook_html(report)`` is the same page as a
fragment for a notebook, its plots drawn in a temporary directory. A view that cannot be written (a read-only run, a full
disk) is skipped with a warning line returned to the caller: rendering a run never fails for it
and never changes what the run recorded.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

from lazyscope.analyze.report import Report
from lazyscope.core.errors import OutputError
from lazyscope.render.html import render_html
from lazyscope.render.plots import PLOTS, plot_data
from lazyscope.render.plotter import Plotter
from lazyscope.render.tensorboard import write_scalars
from lazyscope.store import atomic_write_text
from lazyscope.store.layout import COMPARE_PNG, REPORT_HTML, TENSORBOARD_DIR


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _plot_paths(run_dir: Path) -> dict[str, Path]:
    return {name: run_dir / name for name in PLOTS}


def write_plots(report: Report, run_dir: Path, plotter: Plotter | None = None
                ) -> tuple[dict[str, bytes], list[str]]:
    """The plots as ``{caption: png bytes}`` (written next to the run's data when possible),
    drawn by ``plotter`` when one was started (see :mod:`lazyscope.render.plotter`), else (or
    when it fails) here."""
    images: dict[str, bytes] = {}
    warnings: list[str] = []
    if not len(report.steps):
        if plotter is not None:
            plotter.close()
        return images, warnings
    data = plot_data(report)
    drawn = plotter.draw(data, _plot_paths(run_dir)) if plotter is not None else None
    for name, (caption, writer) in PLOTS.items():
        path = run_dir / name
        try:
            if drawn is None:
                writer(data, path)
            elif drawn[name] is not None:
                warnings.append(str(drawn[name]))
                continue
            images[caption] = path.read_bytes()
        except OSError as err:
            warnings.append(f"could not write {path}: {_why(err)}")
    compare_png = run_dir / COMPARE_PNG
    if compare_png.is_file():
        images["policies compared"] = compare_png.read_bytes()
    return images, warnings


def notebook_html(report: Report) -> str:
    """The report as an HTML fragment for a notebook (``Report._repr_html_``): the plots drawn
    in a temporary directory and inlined; nothing is written into the run directory."""
    with tempfile.TemporaryDirectory(prefix="lazyscope-plots-") as tmp:
        images, _ = write_plots(report, Path(tmp))
    return render_html(report, images, fragment=True)


def write_html(report: Report, run_dir: Path, images: dict[str, bytes]) -> Path:
    """Write ``report.html`` atomically; return its path."""
    path = run_dir / REPORT_HTML
    atomic_write_text(path, render_html(report, images))
    return path


def write_views(report: Report, run_dir: Path | str, *, need_html: bool = False,
                plotter: Plotter | None = None) -> list[str]:
    """Write every view of ``report`` into ``run_dir``; return one warning line per view that
    could not be written. ``need_html``: the HTML report is what was asked for: raise an
    OutputError (exit 3) when it cannot be written. ``plotter``: a plotter process started
    before the run was read draws the plots (the TensorBoard scalars are written meanwhile)."""
    run_dir = Path(run_dir)
    if plotter is not None and len(report.steps):  # drawn while the scalars are written
        plotter.submit(plot_data(report), _plot_paths(run_dir))
    scalars = _write_scalars(report, run_dir)
    images, warnings = write_plots(report, run_dir, plotter)
    try:
        write_html(report, run_dir, images)
    except OSError as err:
        if need_html:
            raise OutputError.from_os(err, run_dir / REPORT_HTML) from None
        warnings.append(f"could not write {run_dir / REPORT_HTML}: {_why(err)}")
    return warnings + scalars


def _write_scalars(report: Report, run_dir: Path) -> list[str]:
    if importlib.util.find_spec("tensorboard") is None or not len(report.steps):
        return []
    try:
        write_scalars(report, run_dir / TENSORBOARD_DIR)
    except OSError as err:
        return [f"could not write TensorBoard scalars in {run_dir / TENSORBOARD_DIR}: "
                f"{_why(err)}"]
    return []
