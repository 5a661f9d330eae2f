"""Issue 46's programs (tests/programs/truth/), traced with the real CLI in fresh processes:
each is named at its marked line by findings of its kind only, with the fix that works for what
it makes; lazyscope's compile count is torch_xla's own, in the same run and in an untraced run.
Also the guards: around a growing ``torch.cat``, entered after ``model.to(dev)``, and two
guarded tests whose outcome does not depend on what ran before them (``pytest``, ``-k``,
``-x``, ``-n 2``, the file's order reversed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, trace_all
from tests.programs import truth
from tests.programs.pitfalls import judge_report
from tests.programs.truth import BACKEND, TRUTH, expected_line, script

pytestmark = pytest.mark.xla

XLA_PROGRAMS = [name for name in TRUTH if name not in BACKEND]


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path}


def run_program(path: Path, *args: str, cwd: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path), *args], env=_env(), cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=600)


def untraced_compiles(path: Path) -> int:
    """torch_xla's CompileTime count of ``path`` run as it is, without lazyscope."""
    code = ("import runpy, torch_xla.debug.metrics as met, torch_xla.core.xla_model as xm; "
            f"runpy.run_path({str(path)!r}, run_name='__main__'); xm.wait_device_ops(); "
            "print('CompileTime', (met.metric_data('CompileTime') or [0])[0])")
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split("CompileTime")[-1].split()[0])


@pytest.fixture(scope="module")
def truth_runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    return trace_all(tmp_path_factory.mktemp("truth"), {n: script(n) for n in TRUTH},
                     {n: ["--backend", b] for n, b in BACKEND.items()})


@pytest.fixture(scope="module")
def untraced() -> dict[str, int]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(XLA_PROGRAMS, pool.map(untraced_compiles, map(script, XLA_PROGRAMS)),
                        strict=True))


@pytest.mark.parametrize("name", list(TRUTH))
def test_named_at_its_line_by_its_kind_only(truth_runs, name) -> None:
    _, report = truth_runs[name]
    reported, verdict = judge_report(TRUTH[name], expected_line(name), str(script(name)),
                                     report)
    assert verdict == "exact", (reported, [(f["kind"], f["line"], f["fix"])
                                           for f in report["findings"]],
                                [(n["kind"], n["line"]) for n in report["notes"]])


@pytest.mark.parametrize("name", XLA_PROGRAMS)
def test_compile_count_is_torch_xla_s_own(truth_runs, untraced, name) -> None:
    _, report = truth_runs[name]
    assert report["compiles"] == report["runtime_counts"]["CompileTime"] == untraced[name], (
        report["compiles"], report["runtime_counts"], untraced[name])


def _one(report: dict, kind: str) -> dict:
    [found] = [f for f in report["findings"] if f["kind"] == kind]
    return found


def test_a_loop_without_a_barrier_is_a_finding_with_its_cost_and_fails_check(
        truth_runs) -> None:
    run, report = truth_runs["no_barrier_loop"]
    f = _one(report, "no_barrier")
    assert report["steps"] == 0 and f["ops"] > 500 and f["compile_seconds"] > 0
    assert f["loop_inputs"] >= 12 and f["compiled_at"]["line"] == f["line"] + 7
    assert "torch_xla.sync()" in f["fix"] and "MpDeviceLoader" in f["fix"]
    assert report["verdict"].startswith("no step barrier in the loop at")
    proc = lazyscope_cmd("check", str(run))
    assert proc.returncode == 1 and "FAIL no-barrier-loops" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["stack_history", "cat_feats"])
def test_a_growing_list_of_inputs_recompiles_and_fails_check(truth_runs, name) -> None:
    run, report = truth_runs[name]
    f = _one(report, "recompile")
    assert f["count"] >= 10 and f["varying"][0]["what"] == "count"
    assert f["varying"][0]["growing"] and "stack the list once" in f["fix"]
    assert not report["verdict"].startswith("no recompilation")
    for extra in ([], ["--warmup-steps", "2"]):
        proc = lazyscope_cmd("check", str(run), *extra)
        assert proc.returncode == 1 and "FAIL max-recompiles" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["arange_helper", "randperm_n", "interpolate_method"])
def test_a_size_made_on_the_device_gets_a_fix_for_a_size(truth_runs, name) -> None:
    f = _one(truth_runs[name][1], "recompile")
    assert "a size made inside the graph differs" in f["detail"]
    assert "fixed sizes" in f["fix"] and "pass it as a device tensor" not in f["fix"]
    if name == "interpolate_method":
        assert "size= from that set instead of scale_factor=" in f["fix"]


@pytest.mark.parametrize("name", ["layer_norm_eps", "pow_exponent_config"])
def test_a_python_float_baked_in_gets_a_fix_for_a_constant(truth_runs, name) -> None:
    f = _one(truth_runs[name][1], "recompile")
    assert "a constant baked into the graph differs" in f["detail"]
    assert "device tensor" in f["fix"] and "fixed sizes" not in f["fix"]


def test_a_size_from_the_data_keeps_the_shape_fixed(truth_runs) -> None:
    f = _one(truth_runs["nonzero_select"][1], "recompile")
    assert "made from the data" in f["fix"] and "weighing by the mask" in f["fix"]


def test_a_tensor_handed_to_tqdm_is_fixed_at_the_user_s_line(truth_runs) -> None:
    f = _one(truth_runs["tqdm_postfix"][1], "sync")
    line = expected_line("tqdm_postfix")
    assert f"tqdm_postfix.py:{line}" in f["fix"] and "own code" not in f["fix"]
    assert "loss.item() every N steps" in f["fix"]


@pytest.mark.parametrize("name", ["grad_accumulation", "bucketed_warmup"])
def test_variants_made_in_warm_up_are_no_leak_and_pass_check(truth_runs, name) -> None:
    run, report = truth_runs[name]
    assert report["findings"] == [] and report["compiles"] >= 4
    assert report["memory"]["graphs_total"] >= 4
    proc = lazyscope_cmd("check", str(run))
    assert proc.returncode == 0 and "ok   no-memory-findings" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- guards


GUARD_CAT = truth.TRUTH_DIR / "guard_cat_preds.py"
GUARD_LATE = truth.TRUTH_DIR / "guard_after_device.py"


def _marked(path: Path, mark: str = "# the line to change") -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if mark in t)


def _count(proc: subprocess.CompletedProcess[str]) -> int:
    found = re.findall(r"^CompileTime (\d+)$", proc.stdout, re.M)
    assert found, proc.stdout + proc.stderr
    return int(found[-1])


def test_a_guard_around_a_growing_cat_raises_at_the_cat(tmp_path: Path) -> None:
    untraced = run_program(GUARD_CAT, "--untraced", cwd=tmp_path)
    assert untraced.returncode == 0 and _count(untraced) == 10  # torch_xla: 10 in 10 steps
    proc = run_program(GUARD_CAT, cwd=tmp_path)
    assert proc.returncode == 1 and "GuardError" in proc.stderr, proc.stderr
    assert f"[recompile] {GUARD_CAT}:{_marked(GUARD_CAT)} " in proc.stderr, proc.stderr
    assert "the f32[8] inputs: 1 -> 2" in proc.stderr and "step 3 done" not in proc.stdout
    fixed = run_program(GUARD_CAT, "--fixed", cwd=tmp_path)
    assert fixed.returncode == 0 and "step 9 done" in fixed.stdout, fixed.stderr


@pytest.mark.parametrize(("rows", "change", "compiles"), [
    ("grow", "dim 0: 5 -> 6", 2), ("switch", "dim 0: 8 -> 12", 2),
    ("six", "dim 0: 4 -> 5", 7)])
def test_a_guard_entered_after_model_to_device_names_the_line(
        tmp_path: Path, rows: str, change: str, compiles: int) -> None:
    untraced = run_program(GUARD_LATE, "--rows", rows, cwd=tmp_path)
    assert untraced.returncode == 0 and _count(untraced) == compiles
    proc = run_program(GUARD_LATE, "--guard", "--rows", rows, cwd=tmp_path)
    message = proc.stderr[proc.stderr.find("GuardError"):]
    assert proc.returncode == 1 and "GuardError" in proc.stderr, proc.stdout + proc.stderr
    assert f"[recompile] {GUARD_LATE}:{_marked(GUARD_LATE)} " in message, message
    assert change in message and "no input shapes" not in message
    # neither a last batch to drop (the size grew, or changed and stayed) nor "a one-off"
    assert "drop" not in message and "one-off" not in message


GUARDED = truth.TRUTH_DIR / "guarded_order.py"


def _pytest(test_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "lazyscope.integrations.pytest_plugin", "-p", "no:cacheprovider",
         "-q", str(test_file), *args], cwd=test_file.parent, env=env, capture_output=True,
        text=True, timeout=600)


def test_two_guarded_tests_give_the_same_outcome_in_any_order(tmp_path: Path) -> None:
    """A on length 24; B 16 -> 24 mid-test: B fails at the batch line whether its length-24
    graph is compiled in its own block or found in torch_xla's cache (A compiled it)."""
    forward = tmp_path / "forward" / "test_order.py"
    forward.parent.mkdir()
    shutil.copy(GUARDED, forward)
    text = GUARDED.read_text()
    head, a, b = re.split(r"(?=@pytest\.mark\.lazyscope)", text)
    backward = tmp_path / "backward" / "test_order.py"
    backward.parent.mkdir()
    backward.write_text(head + b.rstrip("\n") + "\n\n\n" + a)  # B runs first
    line = _marked(forward)
    outcomes = {}
    for label, path, args in [("pytest", forward, ()), ("-k", forward, ("-k", "test_b")),
                              ("-x", forward, ("-x",)),
                              ("-n 2", forward, ("-p", "xdist", "-n", "2")),
                              ("B first", backward, ())]:
        proc = _pytest(path, *args)
        assert proc.returncode == 1, (label, proc.stdout + proc.stderr)
        assert "FAILED test_order.py::test_b" in proc.stdout, (label, proc.stdout)
        assert "FAILED test_order.py::test_a" not in proc.stdout, (label, proc.stdout)
        assert f"[recompile] {path}:{line} " in proc.stdout, (label, proc.stdout)
        assert "dim 0: 16 -> 24" in proc.stdout, (label, proc.stdout)
        outcomes[label] = re.findall(r"\d+ (?:failed|passed|deselected)", proc.stdout)[-2:]
    assert outcomes["pytest"] == outcomes["-x"] == outcomes["B first"] == ["1 failed",
                                                                            "1 passed"], outcomes
    assert outcomes["-k"] == ["1 failed", "1 deselected"], outcomes


def test_every_report_validates_against_the_shipped_schema(truth_runs) -> None:
    """The JSON of every run validates against the shipped schema (the new finding kind and
    facts are in it)."""
    import jsonschema

    schema = json.loads((REPO / "lazyscope" / "render" / "report.schema.json").read_text())
    for _, report in truth_runs.values():
        jsonschema.validate(report, schema)
