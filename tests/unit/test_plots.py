"""Every text of lazyscope's own in a plot renders as matplotlib means it (a log axis's ticks
read 10³, not ``$\\mathdefault{10^{3}}$``), while program text (the script's arguments, policy
names) stays literal: ``$x^2$`` in an argument is drawn as those five characters.

Asserted on the figures' Text objects after drawing: ``get_parse_math()`` and the rendered width
(``get_text()`` is the same mathtext string whether it is parsed or not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyscope.analyze.compare import CompareRow, Comparison
from lazyscope.analyze.report import build_report
from lazyscope.render import plots
from lazyscope.render.plots import write_compare_png
from lazyscope.store import load_run

PROGRAM_TEXT = ("$\\foo$", "$x^2$", "bucket:$8$")


@pytest.fixture
def figures(monkeypatch) -> list:
    """The figures the plot writers make, in order."""
    made: list = []
    real = plots.new_figure

    def keep(figsize):
        made.append(real(figsize))
        return made[-1]

    monkeypatch.setattr(plots, "new_figure", keep)
    return made


def _texts(fig) -> list:
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _check(fig, names: tuple[str, ...] = ()) -> tuple[int, int]:
    """Program text (holding PROGRAM_TEXT, or one of ``names``) literal, everything else
    parsed; returns (program texts, mathtext ticks)."""
    renderer = fig.canvas.get_renderer()
    program = ticks = 0
    for t in _texts(fig):
        text = t.get_text()
        if any(p in text for p in PROGRAM_TEXT) or text in names:
            program += 1
            assert t.get_parse_math() is False, text
        else:
            assert t.get_parse_math() is True, text
        if "\\mathdefault" in text:
            ticks += 1
            # drawn as a number: 10³ is a few characters wide, the raw string ~150 px or more
            assert t.get_window_extent(renderer).width < 60, (text, t.get_window_extent(renderer))
    return program, ticks


def test_run_plots(data_run, tmp_path: Path, figures) -> None:
    run = load_run(data_run("static20"))
    run.meta.args = ["--name", *PROGRAM_TEXT]
    report = build_report(run)
    plots.write_timeline(report, tmp_path / "t.png")
    plots.write_time_split(report, tmp_path / "s.png")
    plots.write_cumulative(report, tmp_path / "c.png")
    timeline, split, cumulative = figures
    assert timeline.axes[0].get_yscale() == "log"  # a compile step 50x the steady ones
    program, ticks = _check(timeline)
    assert program == 1 and ticks >= 2  # the title; the log axis's decades
    title = timeline.axes[0].title
    assert "$x^2$" in title.get_text() and title.get_parse_math() is False
    assert _check(cumulative) == (0, 0)
    # the split's axis is symmetric-log when warm-up dwarfs the steady steps: its decades are
    # mathtext ticks, drawn as numbers (checked in _check)
    assert split.axes[0].get_yscale() == "symlog" and _check(split)[0] == 0


def test_compare_plot(tmp_path: Path, figures) -> None:
    rows = [CompareRow(policy=name, path=f"/runs/{name}", status="ok", steps=3, compiles=2,
                       tokens_per_s=tps, padding_efficiency=0.5,
                       cumulative_wall_s=(1.0, 2.0, 3.5), cumulative_tokens=(10, 20, 35))
            for name, tps in (("max", 10.0), ("bucket:$8$", 10_000.0))]
    result = Comparison(scenario="decoder", steps=3, args=["--name", "$\\foo$"],
                        policies=["max", "bucket:$8$"], rows=rows)
    write_compare_png(result, tmp_path / "compare.png")
    (fig,) = figures
    program, _ = _check(fig, names=("max",))
    assert program == 5  # the suptitle, each policy's tick label and legend entry



def test_a_long_command_line_title_is_wrapped_inside_the_figure() -> None:
    """pytorch/xla's train_decoder_only_base.py with five flags overflowed the timeline's
    title on both sides: a program's title is wrapped at what a figure's width holds."""
    title = ("/tmp/rx/train_decoder_only_base.py --hidden-size 64 --num-layers 2 "
             "--intermediate-size 256 --num-steps 12 --print-metrics")
    lines = plots.wrapped(title).split("\n")
    assert len(lines) == 2 and all(len(line) <= 90 for line in lines)
    assert " ".join(lines) == title
    assert plots.wrapped("train.py") == "train.py"
    assert max(map(len, plots.wrapped("x" * 200).split("\n"))) == 90
    assert max(map(len, plots.wrapped("x" * 200, 11.0).split("\n"))) == 123
