"""A command imports what it uses: ``import lazyscope`` loads no backend, store or analysis, and
``report --format json`` / ``check`` load no backend, no notebook integration, no plotting, no
terminal styling, no pandas and no torch (each in a fresh interpreter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAVED = REPO / "tests" / "data" / "xla" / "dynamic20"
#: module prefixes a read-only command of a small run must not import
HEAVY = ("torch", "torch_xla", "matplotlib", "IPython", "rich", "pandas",
         "lazyscope.backends.", "lazyscope.integrations", "lazyscope.commands.cases",
         "lazyscope.render.views", "lazyscope.render.plots", "lazyscope.integrations.live")


def _imported_by(code: str) -> list[str]:
    probe = (f"import sys\n{code}\nheavy = {HEAVY!r}\n"
             "print(sorted(m for m in sys.modules if m.startswith(heavy)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout.strip().splitlines()[-1])  # noqa: S307 - our own print of a list


def test_import_lazyscope_imports_only_its_core() -> None:
    code = ("import lazyscope\n"
            "assert not [m for m in sys.modules if m.startswith(('lazyscope.store', "
            "'lazyscope.analyze', 'lazyscope.model', 'lazyscope.render'))]")
    assert _imported_by(code) == []


@pytest.mark.parametrize("args", [["report", "RUN", "--format", "json"], ["check", "RUN"]])
def test_a_read_only_command_imports_what_it_uses(tmp_path: Path, args: list[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAVED, run)
    argv = [str(run) if a == "RUN" else a for a in args]
    code = ("import contextlib, io\nfrom lazyscope.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main({argv!r})")
    assert _imported_by(code) == []
