"""The pytest plugin on real torch_xla: a test file with a recompiling and a healthy test under
``@pytest.mark.lazyscope`` run by pytest in a fresh process (``-p lazyscope.integrations.pytest_plugin``: the
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
        [sys.executable, "-m", "pytest", "-p", "lazyscope.integrations.pytest_plugin", "--strict-markers",
         "-p", "no:cacheprovider", "-q", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, test_file


def line_of(path: Path, marker: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if marker in t)


def test_entry_point_is_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"lazyscope": "lazyscope.integrations.pytest_plugin"}
    import lazyscope.integrations.pytest_plugin as plugin

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
    listed = subprocess.run([*base, "-p", "lazyscope.integrations.pytest_plugin", "--markers"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    assert "@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2" in listed.stdout
    collected = subprocess.run([*base, "-p", "lazyscope.integrations.pytest_plugin", "--collect-only", "-q"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    # without the plugin the marker is unknown: --strict-markers refuses it (the test can fail)
    unknown = subprocess.run([*base, "--collect-only", "-q"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0 and "'lazyscope' not found in `markers`" in unknown.stdout


def _pytest(tmp_path: Path, text: str, *options: str,
            autoload: bool = False) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_marked.py"
    test_file.write_text(text)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path}
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", *options, "-p", "no:cacheprovider",
                           "-q", str(test_file)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize(("marker", "why"), [
    ("lazyscope(0)", "takes keyword arguments only, got 1 positional (0)"),
    ("lazyscope(max_recompile=0)", "unknown argument max_recompile; it takes max_recompiles, "),
    ("lazyscope(max_recompiles='zero')", "max_recompiles='zero': int or None expected"),
    ("lazyscope(max_recompiles=True)", "max_recompiles=True: int or None expected"),
    ("lazyscope(no_fallbacks='yes')", "no_fallbacks='yes': bool expected"),
    ("lazyscope(max_recompiles=-1)", "max_recompiles must be a whole number >= 0 or None"),
    ("lazyscope(backend='tpu')", "unknown backend 'tpu'"),
    ("lazyscope(max_recompiles=None)", "no rule to check"),
])
def test_a_bad_marker_is_a_usage_error_at_collection(tmp_path: Path, marker: str,
                                                     why: str) -> None:
    """Before any test runs: pytest's usage error (exit 4) naming the test and the marker, no
    traceback through the plugin."""
    proc = _pytest(tmp_path, "import pytest\n\n"
                             f"@pytest.mark.{marker}\ndef test_it():\n    pass\n\n"
                             "def test_other():\n    pass\n",
                   "-p", "lazyscope.integrations.pytest_plugin")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert why in proc.stderr, proc.stderr
    assert proc.stderr.startswith("ERROR: test_marked.py::test_it: @pytest.mark.lazyscope(...): ")
    assert "Traceback" not in proc.stderr + proc.stdout and "pytest_plugin.py" not in proc.stderr
    assert "passed" not in proc.stdout  # nothing ran


def test_the_plugin_given_with_p_and_installed_is_loaded_once(tmp_path: Path) -> None:
    """`-p lazyscope.integrations.pytest_plugin` with the entry point installed (this venv has it): one
    plugin, no page of pytest's plugin registry."""
    import importlib.metadata as md

    if not any(e.name == "lazyscope" for e in md.entry_points(group="pytest11")):
        pytest.skip("the lazyscope entry point is not installed in this environment")
    text = "def test_it():\n    pass\n"
    for options in (("-p", "lazyscope.integrations.pytest_plugin"), ()):
        proc = _pytest(tmp_path, text, *options, autoload=True)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "1 passed" in proc.stdout and "already registered" not in proc.stderr
        assert len(proc.stderr) < 200, proc.stderr[:500]
    proc = _pytest(tmp_path, "import pytest\n\n@pytest.mark.lazyscope(oops=1)\n"
                             "def test_it():\n    pass\n",
                   "-p", "lazyscope.integrations.pytest_plugin", autoload=True)
    assert proc.returncode == 4 and "unknown argument oops" in proc.stderr, proc.stderr
