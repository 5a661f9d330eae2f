"""The %%lazyscope cell magic in a real IPython shell (in-process, the eager backend on the CPU:
no XLA): a traced cell returns its Report, which displays as an HTML fragment and as the text
report; bad options and an existing run directory are one line and run nothing; a cell that
raises keeps its run (status failed) and raises as usual. The magic on XLA inside a real
Jupyter kernel is tests/integration/test_notebooks.py (your_own_loop)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lazyscope.analyze.report import Report
from lazyscope.store import load_run

InteractiveShell = pytest.importorskip("IPython.core.interactiveshell").InteractiveShell

CELL = """
import torch, lazyscope
seen = []
for step in range(3):
    x = torch.ones(4, 4) * step
    seen.append(float(x.sum()))
    lazyscope.barrier()
"""


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "lazyscope")
    yield ip
    InteractiveShell.clear_instance()


def test_cell_is_traced_and_shows_its_report(shell, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cell"
    report = shell.run_cell_magic("lazyscope", f"--backend eager --device cpu --out {out}", CELL)
    assert isinstance(report, Report)
    assert shell.user_ns["seen"] == [0.0, 16.0, 32.0]  # ran in the notebook's namespace
    run = load_run(out)
    assert run.status == "ok" and len(run.steps) == 3 and run.meta.backend == "eager"
    assert run.meta.target.startswith("notebook cell In[")
    assert f"run saved in {out}" in capsys.readouterr().out
    html = report._repr_html_()
    assert html.startswith('<div class="lazyscope-report"><style>') and "<html" not in html
    plain = shell.display_formatter.format(report)[0]["text/plain"]
    assert plain.startswith(f"lazyscope report: {out}") and "Report(" not in plain


def test_refusals_are_one_line(shell, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cell"
    assert shell.run_cell_magic("lazyscope", "--backend eager --bogus", CELL) is None
    err = capsys.readouterr().err.strip()
    assert err == "lazyscope: %%lazyscope: unrecognized arguments: --bogus"
    assert shell.run_cell_magic("lazyscope", "--backend tpu9", CELL) is None
    assert "invalid choice: 'tpu9'" in capsys.readouterr().err
    assert shell.run_cell_magic("lazyscope", "--steps 0", CELL) is None
    assert "--steps: '0' is out of range: at least 1" in capsys.readouterr().err
    shell.user_ns.pop("seen", None)
    assert shell.run_cell_magic("lazyscope", f"--backend eager --device cpu --out {out}",
                                CELL) is not None
    shell.user_ns.pop("seen", None)
    capsys.readouterr()
    assert shell.run_cell_magic("lazyscope", f"--backend eager --device cpu --out {out}",
                                CELL) is None
    err = capsys.readouterr().err.strip()
    assert err.startswith("lazyscope: ") and "--force" in err and len(err.splitlines()) == 1
    assert "seen" not in shell.user_ns  # nothing ran


def test_a_cell_that_raises_keeps_its_run(shell, tmp_path: Path, capsys) -> None:
    out = tmp_path / "boom"
    body = "import lazyscope\nlazyscope.barrier()\nraise ValueError('boom')\n"
    with pytest.raises(ValueError, match="boom"):
        shell.run_cell_magic("lazyscope", f"--backend eager --device cpu --out {out}", body)
    assert f"the run so far is kept in {out} (status failed)" in capsys.readouterr().err
    run = load_run(out)
    assert run.status == "failed" and len(run.steps) == 1
    # the cell's code is "cell In[N]", numbered as the cell shows (line 1: the %%lazyscope line)
    assert re.fullmatch(r"ValueError: boom \(at cell In\[\d+\]:4\)", run.meta.error or ""), \
        run.meta.error
