"""The plotter process (lazyscope.render.plotter): it draws the same PNGs as the report's own
process, says which plot it could not write, and a plotter that fails only means the plots are
drawn in-process. ``lazyscope report --format html`` leaves matplotlib to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lazyscope.analyze.report import build_report
from lazyscope.render.plots import PLOTS, plot_data
from lazyscope.render.plotter import Plotter
from lazyscope.render.views import write_plots, write_views
from lazyscope.store import load_run

REPO = Path(__file__).resolve().parents[2]


def test_the_plotter_draws_what_the_process_draws(data_run, tmp_path) -> None:
    run = data_run("static20")
    report = build_report(load_run(run))
    here = tmp_path / "here"
    here.mkdir()
    images, warnings = write_plots(report, here)
    assert warnings == [] and len(images) == len(PLOTS)

    plotter = Plotter.start()
    assert plotter is not None
    answer = plotter.draw(plot_data(report), {name: run / name for name in PLOTS})
    assert answer == {name: None for name in PLOTS}
    for name in PLOTS:
        assert (run / name).read_bytes() == (here / name).read_bytes(), name


def test_a_plot_the_plotter_cannot_write_is_its_warning(data_run, tmp_path) -> None:
    report = build_report(load_run(data_run("static20")))
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    _, in_process = write_plots(report, blocked)
    plotter = Plotter.start()
    assert plotter is not None
    images, warnings = write_plots(report, blocked, plotter)
    assert images == {}
    assert warnings == in_process and len(warnings) == len(PLOTS)
    assert all(w.startswith(f"could not write {blocked}/") for w in warnings)


def test_a_plotter_that_died_leaves_the_plots_to_the_process(data_run) -> None:
    run = data_run("static20")
    report = build_report(load_run(run))
    plotter = Plotter.start()
    assert plotter is not None
    plotter._proc.kill()  # type: ignore[union-attr]
    assert write_views(report, run, plotter=plotter) == []
    for name in PLOTS:
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_html_leaves_matplotlib_to_the_plotter(data_run) -> None:
    run = data_run("static20")
    code = ("import sys; from pathlib import Path\n"
            "from lazyscope.commands.common import report_and_views\n"
            f"report_and_views(Path({str(run)!r}), views=True, need_html=True)\n"
            "print('matplotlib' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    assert "<img" in (run / "report.html").read_text()
    for name in PLOTS:
        assert (run / name).stat().st_size > 1000
