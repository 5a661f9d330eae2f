"""Each pitfall script (tests/programs/pitfalls/), traced with the real CLI in a fresh
process, is reported at its marked line by findings of the planted kind only (a one-off
recompilation as a note, the clean script with nothing). Also: the library API gives the same
steps and findings as a script traced by the CLI. The healthy programs are in test_healthy.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd, report_json, trace_all
from tests.programs import healthy, pitfalls
from tests.programs.pitfalls import FALLBACK_OPS, PITFALLS, expected_line, judge

pytestmark = pytest.mark.xla


@pytest.fixture(scope="session")
def pitfall_runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """`lazyscope trace tests/programs/pitfalls/X.py` + its JSON report, for every one."""
    return trace_all(tmp_path_factory.mktemp("pitfalls"),
                     {name: pitfalls.script(name) for name in PITFALLS},
                     {name: pitfalls.trace_args(name) for name in PITFALLS})


@pytest.fixture(scope="session")
def pitfall_reports(pitfall_runs) -> dict[str, dict]:
    return {name: report for name, (_, report) in pitfall_runs.items()}


def test_the_suite_plants_every_kind_the_issue_lists() -> None:
    kinds = list(PITFALLS.values())
    assert len([k for k in kinds if k]) >= 25 and "" in kinds
    for kind in pitfalls.KINDS:
        assert kinds.count(kind) >= (1 if kind == "reuse" else 2), kind
    for name, kind in PITFALLS.items():
        assert pitfalls.expected_kind(name) == kind, name
        assert (expected_line(name) is None) == (kind == ""), name
    assert len(healthy.HEALTHY) >= 6


@pytest.mark.parametrize("name", list(PITFALLS))
def test_pitfall_is_reported_at_its_marked_line_and_nothing_else(pitfall_reports, name) -> None:
    report = pitfall_reports[name]
    reported, verdict = judge(name, report)
    assert verdict == "exact", (reported, [(f["kind"], f["line"]) for f in report["findings"]],
                                [(n["kind"], n["line"]) for n in report["notes"]])
    for finding in report["findings"]:
        assert finding["count"] >= 1 and finding["seconds"] >= 0
        assert finding["detail"] and finding["fix"]
        # the stack: the line to change first, its callers after it, never library frames
        assert finding["stack"][0]["line"] == finding["line"]
        assert not any("site-packages" in fr["file"] for fr in finding["stack"])


def test_varying_length_names_the_dimension_the_values_and_the_fix(pitfall_reports) -> None:
    [finding] = pitfall_reports["varying_seq_len"]["findings"]
    assert finding["count"] >= 6
    [v] = finding["varying"]
    assert v["dim"] == 1 and len(v["values"]) >= 7 and not v["growing"]
    assert "bucket" in finding["fix"] and "lazyscope advise" in finding["fix"]
    assert finding["compiled_at"]["line"] != finding["line"]  # the barrier is not the answer


def test_one_partial_batch_is_a_note_that_says_drop_last(pitfall_reports) -> None:
    report = pitfall_reports["partial_batch"]
    assert report["findings"] == []
    [note] = report["notes"]
    assert "4 -> 2" in note["detail"] and "drop_last=True" in note["fix"]


def test_a_cast_added_mid_run_is_named_at_the_cast_without_changing_the_program(
        pitfall_runs) -> None:
    """The cast's graph is compiled in a step traced without source lines: the next barrier
    lowers the same program with them (one lowering: no compilation, no execution more than an
    untraced run, whose torch_xla counters are read here)."""
    run, report = pitfall_runs["cast_added_midrun"]
    [note] = report["notes"]
    assert note["line"] == expected_line("cast_added_midrun") and "cast" in note["fix"]
    script = pitfalls.script("cast_added_midrun")
    code = ("import runpy, json, torch_xla.debug.metrics as met, torch_xla.core.xla_model as xm; "
            f"runpy.run_path({str(script)!r}, run_name='__main__'); "
            "xm.wait_device_ops(); "  # executions are asynchronous: count the last one too
            "print(json.dumps([(met.metric_data(m) or [0])[0] for m in "
            "('CompileTime', 'ExecuteTime', 'TransferFromDeviceTime')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert proc.returncode == 0, proc.stderr
    compiles, executions, from_device = json.loads(proc.stdout.splitlines()[-1])
    steps = load_run(run).steps
    assert steps.total("compile_count") == compiles
    assert steps.total("execute_count") == executions
    assert steps.total("from_device_count") == from_device


def test_sync_findings_count_every_step_and_say_where_the_call_came_from(
        pitfall_reports) -> None:
    for name in ("item_per_step", "branch_on_value"):
        [finding] = pitfall_reports[name]["findings"]
        assert finding["count"] == 6 and finding["steps"] == list(range(6)), name
    [helper] = pitfall_reports["helper_sync"]["findings"]
    assert len(helper["stack"]) >= 2  # the helper's line, then the loop's call of it
    [inv] = pitfall_reports["linalg_inv"]["findings"]
    assert "inv" in inv["detail"]


@pytest.mark.parametrize("name", sorted(FALLBACK_OPS))
def test_fallback_finding_names_the_op_counted_exactly(pitfall_reports, name) -> None:
    report = pitfall_reports[name]
    ops = {f["op"] for f in report["findings"]}
    assert FALLBACK_OPS[name] in ops
    assert report["fallback_ops"].get(FALLBACK_OPS[name], 0) >= 1


def test_text_report_lists_findings_before_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--out", str(out), str(pitfalls.script("item_per_step")))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip("\n").splitlines()
    verdict_at = max(i for i, ln in enumerate(lines) if ln.startswith("verdict: "))
    findings_at = next(i for i, ln in enumerate(lines) if ln.startswith("findings ("))
    assert findings_at < verdict_at
    assert f"item_per_step.py:{expected_line('item_per_step')} x6" in proc.stdout


_LOOP = """\
import torch, torch_xla
import torch_xla.core.xla_model as xm
dev = torch_xla.device()
w = torch.ones(8, device=dev)
for n in [3, 5, 7, 9, 11]:
    x = torch.ones(4, n).to(dev)  # ORIGIN
    w = w + x.sum()
    xm.mark_step()  # BARRIER
"""


def _marked(source: str, mark: str = "# BARRIER") -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if mark in ln)


def test_library_api_matches_the_cli(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(_LOOP)
    cli_out = tmp_path / "cli"
    proc = lazyscope_cmd("trace", "--out", str(cli_out), str(script))
    assert proc.returncode == 0, proc.stderr
    api_script = tmp_path / "api_loop.py"
    body = textwrap.indent(_LOOP.split("dev = ", 1)[1], "    ")
    api_source = ("import lazyscope\n" + _LOOP.split("dev = ", 1)[0]
                  + f"with lazyscope.trace({str(tmp_path / 'api')!r}):\n    dev = "
                  + body.lstrip())
    api_script.write_text(api_source)
    proc = subprocess.run([sys.executable, str(api_script)], cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env={**__import__("os").environ, "PJRT_DEVICE": "CPU",
                               "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    cli, api = report_json(cli_out), report_json(tmp_path / "api")
    assert cli["steps"] == api["steps"] == 5
    assert cli["compiles"] == api["compiles"] == 5
    # the line to change is where the varying tensor is made; the barrier is where it compiled
    for report, source in ((cli, _LOOP), (api, api_source)):
        [f] = report["findings"]
        assert (f["kind"], f["line"], f["count"]) == ("recompile", _marked(source, "# ORIGIN"), 3)
        assert f["compiled_at"]["line"] == _marked(source)
    assert cli["findings"][0]["varying"] == api["findings"][0]["varying"]
    # step 1 also gained an input (w, a constant at step 0): step 0's graph is another
    # computation (family), so the varying lengths are those of steps 1..4
    assert [(v["dim"], v["values"]) for v in cli["findings"][0]["varying"]] == [
        (1, [5, 7, 9, 11])]


def test_every_tensor_an_eval_loop_grows_is_called_growth(pitfall_reports) -> None:
    """Predictions, labels and scores gathered with torch.cat: two inputs of one signature and
    a third of another, all growing by a batch a step. Each is growth (never 'pad to a few
    bucket sizes'), named at the first cat."""
    report = pitfall_reports["eval_accumulate_predictions"]
    (f,) = [f for f in report["findings"] if f["kind"] == "recompile"]
    assert len(f["varying"]) == 2 and all(v["growing"] for v in f["varying"])
    assert "grows at every compilation" in f["fix"] and "bucket" not in f["fix"]
