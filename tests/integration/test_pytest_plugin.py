"""The pytest plugin on real torch_xla: a test file with a recompiling and a healthy test under
``@pytest.mark.lazyscope`` run by pytest in a fresh process (``-p lazyscope.pytest_plugin``: the
installed entry points are another checkout's), and the entry point the package declares."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.conftest import REPO

PROGRAM = REPO / "tests" / "programs" / "guard" / "guarded_tests.py"
FIXTURE = REPO / "tests" / "programs" / "guard" / "guarded_fixture.py"


def run_pytest(program: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    test_file = tmp_path / f"test_{program.stem.split('_')[-1]}.py"  # a name pytest collects
    shutil.copy(program, test_file)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path,
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "lazyscope.pytest_plugin", "--strict-markers",
         "-p", "no:cacheprovider", "-q", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, test_file


def line_of(path: Path, marker: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if marker in t)


def test_entry_point_is_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"lazyscope": "lazyscope.pytest_plugin"}
    import lazyscope.pytest_plugin as plugin

    assert callable(plugin.pytest_configure) and callable(plugin.lazyscope_guard)


@pytest.mark.xla
def test_one_failed_one_passed_naming_the_line(tmp_path: Path) -> None:
    proc, test_file = run_pytest(PROGRAM, tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 1 passed" in out, out
    # the short summary names the broken rule, not a path (pytest cuts it to 80 columns)
    assert "FAILED test_tests.py::test_recompiles - step 5: max-recompiles: 2 recompil" in out, \
        out
    line, sync = line_of(test_file, "# the line to change"), line_of(test_file, "sync()")
    assert f"{test_file}:{sync}: the step barrier where the guard broke" in out, out
    assert f"[recompile] {test_file}:{line} " in out, out
    assert "max-recompiles:" in out and "fix: " in out
    # the report is the finding, not a traceback through lazyscope's barrier
    assert "collector.py" not in out


@pytest.mark.xla
def test_fixture_with_the_marker_arguments(tmp_path: Path) -> None:
    proc, test_file = run_pytest(FIXTURE, tmp_path)
    out = proc.stdout
    assert proc.returncode == 1 and "1 failed" in out, out + proc.stderr
    assert "step 3: max-syncs-per-step: 1 step with more than 0 host syncs" in out, out
    # one read is no per-step sync site yet: the check's evidence names the line
    assert f"reads at {test_file}:{line_of(test_file, '# the line to change')}: 1 in 1 step" \
        in out, out


def test_marker_is_registered(tmp_path: Path) -> None:
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n@pytest.mark.lazyscope(max_recompiles=0)\ndef test_marked():\n"
        "    pass\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers"]
    listed = subprocess.run([*base, "-p", "lazyscope.pytest_plugin", "--markers"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    assert "@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2" in listed.stdout
    collected = subprocess.run([*base, "-p", "lazyscope.pytest_plugin", "--collect-only", "-q"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    # without the plugin the marker is unknown: --strict-markers refuses it (the test can fail)
    unknown = subprocess.run([*base, "--collect-only", "-q"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0 and "'lazyscope' not found in `markers`" in unknown.stdout
