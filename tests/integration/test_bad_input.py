"""Bad input that needs a real process: lazyscope on a machine without torch_xla.

torch_xla is hidden, not uninstalled: a ``sitecustomize.py`` first on PYTHONPATH sets
``sys.modules["torch_xla"] = None``, so ``import torch_xla`` raises ModuleNotFoundError and
``importlib.util.find_spec("torch_xla")`` returns None, as on a machine where it is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO, lazyscope_cmd

HIDE = 'import sys\nsys.modules["torch_xla"] = None\n'


@pytest.fixture
def no_xla_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "hide_xla"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    probe = subprocess.run([sys.executable, "-c", "import torch_xla"], env={**os.environ, **env},
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr  # the trick works
    return env


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_trace_without_torch_xla(tmp_path, no_xla_env) -> None:
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--steps", "2", "--out", str(out), "lazytensor-dynamic",
                         env=no_xla_env)
    assert proc.returncode == 4
    assert _one_line(proc) == (
        "lazyscope: torch_xla is not installed: pip install 'lazyscope[xla]' "
        "(torch==2.9.0 torch_xla==2.9.0), or use --backend eager"
    )
    assert not out.exists()


def test_trace_script_without_torch_xla_keeps_an_old_run(tmp_path, no_xla_env) -> None:
    old = tmp_path / "old"
    shutil.copytree(DATA / "xla" / "static20", old)
    before = (old / "steps.bin").read_bytes()
    script = tmp_path / "train.py"
    script.write_text("import torch_xla\n")
    proc = lazyscope_cmd("trace", "--out", str(old), "--force", str(script), env=no_xla_env)
    assert proc.returncode == 4
    assert "torch_xla is not installed" in _one_line(proc)
    assert (old / "steps.bin").read_bytes() == before


def test_saved_runs_need_no_torch_xla(tmp_path, no_xla_env) -> None:
    run = tmp_path / "dyn"
    shutil.copytree(DATA / "xla" / "dynamic20", run)
    for args, code in ((["report", str(run)], 0), (["check", str(run)], 1),
                       (["diff", str(run), str(run)], 0), (["scenarios"], 0)):
        proc = lazyscope_cmd(*args, env=no_xla_env)
        assert proc.returncode == code, proc.stderr
        assert proc.stderr == ""
