"""`lazyscope check`: rules -> violations with evidence, on saved and hand-built runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyscope.analyze.check import Rules, check_run, syncs_per_step
from lazyscope.cli import main
from lazyscope.model import Event, Meta, RunWriter, Site, Step, load_run


def make_run(path: Path, steps: list[Step], events: list[Event] = (), status: str | None = "ok",
             error: str | None = None) -> Path:
    """Write a run directory; ``status=None`` leaves it ``running`` (a killed run)."""
    writer = RunWriter(path, Meta(target="hand-made", backend="xla"))
    for s in steps:
        writer.write_step(s)
    for e in events:
        writer.write_event(e)
    if status is not None:
        writer.finish(status, error)
    return path


def test_dynamic_run_fails_with_evidence(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    result = check_run(run, Rules())  # the default rule: no compilation after warm-up
    assert not result.passed
    (v,) = result.violations
    assert v.rule == "max-compiles-after-warmup" and v.actual == 18 and v.limit == 0
    assert v.evidence[0].startswith("step 2: 1 compilation(s), graph a0e418c32163")
    assert "lazytensor_dynamic.py:61" in v.evidence[0]
    assert v.evidence[-1] == "... and 8 more steps that compiled"


def test_static_run_passes(data_run) -> None:
    result = check_run(load_run(data_run("static20")), Rules())
    assert result.passed and [r for r, _ in result.rules] == ["max-compiles-after-warmup"]


def test_compile_limit_is_inclusive(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    assert check_run(run, Rules(max_compiles_after_warmup=18)).passed
    assert not check_run(run, Rules(max_compiles_after_warmup=17)).passed


def test_syncs_count_transfers_and_sync_events(tmp_path) -> None:
    site = Site("/u/train.py", 12, "loop")
    steps = [Step(0, from_device_count=0), Step(1, from_device_count=2), Step(2)]
    events = [Event("sync", 2, site=site), Event("sync", 2, site=site), Event("sync", 2, site=site),
              Event("sync", 1, site=site)]
    run = load_run(make_run(tmp_path / "r", steps, events))
    assert syncs_per_step(run) == {0: 0, 1: 2, 2: 3}
    result = check_run(run, Rules(max_syncs_per_step=1))
    (v,) = result.violations
    assert v.actual == 3
    assert v.evidence == ["step 1: 2 sync(s) at /u/train.py:12 (loop)",
                          "step 2: 3 sync(s) at /u/train.py:12 (loop)"]
    assert check_run(run, Rules(max_syncs_per_step=3)).passed


def test_fallbacks_and_slow_steps(tmp_path) -> None:
    steps = [Step(0, wall_s=5.0), Step(1, wall_s=0.1), Step(2, wall_s=0.2),
             Step(3, wall_s=0.9, fallback_ops={"aten::nonzero": 2}),
             Step(4, kind="tail", fallback_ops={"aten::nonzero": 1})]
    run = load_run(make_run(tmp_path / "r", steps))
    result = check_run(run, Rules(no_fallbacks=True, max_step_seconds=0.5))
    by_rule = {v.rule: v for v in result.violations}
    assert by_rule["no-fallbacks"].actual == 3
    assert by_rule["no-fallbacks"].evidence == ["aten::nonzero: 3 execution(s) in steps 3, tail"]
    # step 0 is warm-up: 5 s there is not a violation
    assert by_rule["max-step-seconds"].evidence == ["step 3: 0.9000 s"]


@pytest.mark.parametrize(("status", "expected"), [(None, "incomplete"), ("failed", "failed"),
                                                  ("interrupted", "interrupted")])
def test_unfinished_runs_fail_the_gate_unless_allowed(tmp_path, status, expected) -> None:
    steps = [Step(i) for i in range(4)]
    run = load_run(make_run(tmp_path / "r", steps, status=status, error="boom" if status else None))
    result = check_run(run, Rules())
    assert [v.rule for v in result.violations] == ["run-status"]
    assert result.violations[0].actual == expected
    relaxed = check_run(run, Rules(allow_incomplete=True))
    assert relaxed.passed
    assert any(expected in n and "--allow-incomplete" in n for n in relaxed.notes)


def test_cli_exit_codes_and_json(capsys, data_run) -> None:
    dyn, static = data_run("dynamic20"), data_run("static20")
    assert main(["check", str(dyn)]) == 1
    out = capsys.readouterr().out
    assert "FAIL max-compiles-after-warmup: 18 compilation(s)" in out
    assert out.rstrip().endswith("result: FAIL (1 rule(s) violated: max-compiles-after-warmup)")
    assert main(["check", str(static), "--no-fallbacks", "--max-syncs-per-step", "0"]) == 0
    assert "result: PASS (2 rule(s) checked)" in capsys.readouterr().out
    assert main(["check", str(dyn), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    assert data["violations"][0]["actual"] == 18
    assert data["rules"] == [{"rule": "max-compiles-after-warmup", "passed": False,
                              "description": "at most 0 compilation(s) after warm-up"}]


@pytest.mark.parametrize("argv", [["--max-compiles-after-warmup", "-1"],
                                  ["--max-step-seconds", "0"], ["--max-syncs-per-step", "x"]])
def test_cli_bad_limits(capsys, data_run, argv) -> None:
    assert main(["check", str(data_run("static20")), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lazyscope: ") and len(err.strip().splitlines()) == 1


def test_cli_check_missing_run(capsys, tmp_path) -> None:
    assert main(["check", str(tmp_path / "nope")]) == 3
    assert "not a directory" in capsys.readouterr().err
