"""The CI gate on reports: rules, evidence, exit codes (saved runs and runs built in memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.report import build_report
from lazyscope.cli import main
from lazyscope.model import FallbackExec, Sync
from lazyscope.store import load_run
from tests.builders import build_run, frame

LOOP = frame("/u/train.py", 12, "loop")


@pytest.fixture
def runs(data_run) -> dict[str, Path]:
    return {name: data_run(name) for name in ("dynamic20", "static20")}


def report(path: Path, **kw):
    return build_report(load_run(path), **kw)


def test_dynamic_run_fails_with_evidence(runs) -> None:
    result = check_report(report(runs["dynamic20"]), Rules())
    assert not result.passed
    (v,) = result.violations
    assert v.rule == "max-recompiles" and v.actual == 19 and v.limit == 0
    assert "lazytensor_dynamic.py:44: 19 recompilations in steps 1, 2" in v.evidence[0]
    assert "graphs cut at" in v.evidence[0] and "lazytensor_dynamic.py:65" in v.evidence[0]


def test_static_run_passes(runs) -> None:
    result = check_report(report(runs["static20"]), Rules())
    assert result.passed and [r for r, _ in result.rules] == [
        "max-recompiles", "no-barrier-loops", "no-memory-findings"]


def test_recompile_limit_is_inclusive_and_a_fixed_warmup_counts_everything(runs) -> None:
    rep = report(runs["dynamic20"])
    assert check_report(rep, Rules(max_recompiles=19)).passed
    assert not check_report(rep, Rules(max_recompiles=18)).passed
    fixed = report(runs["dynamic20"], warmup_steps=5)
    (v,) = check_report(fixed, Rules()).violations
    assert v.actual == 15 and "from step 5 on" in v.message


def test_a_one_off_recompile_is_a_note_not_a_violation(tmp_path) -> None:
    from lazyscope.model import Compile, GraphInput

    barrier = (LOOP,)
    events = [{"kind": "compile", "step": s, "seconds": 1.0, "stack": barrier, "key": k,
               "payload": Compile(inputs=[GraphInput("f32", shape)], ops={"dot": 1},
                                  digest=k)}
              for s, k, shape in [(0, "a", [4, 8]), (9, "b", [2, 8])]]
    run = build_run(tmp_path / "r", steps=[{"wall_s": 0.1, "compile_count": 0}] * 10,
                    events=events, measured=["wall_s", "compile_count"])
    result = check_report(build_report(run), Rules())
    assert result.passed and any("recompilation after warm-up" in n for n in result.notes)


def test_syncs_count_transfers_and_sync_events(tmp_path) -> None:
    events = [{"kind": "sync", "step": 1, "stack": (LOOP,), "payload": Sync(read=".item()")}
              for _ in range(2)]
    events += [{"kind": "sync", "step": 2, "stack": (LOOP,), "payload": Sync(read="if")}]
    run = build_run(tmp_path / "r", steps=[{"wall_s": 0.1, "from_device_count": n}
                                           for n in (0, 1, 3)], events=events,
                    measured=["wall_s", "from_device_count"])
    rep = build_report(run)
    assert list(rep.syncs_per_step) == [0, 2, 3]
    (v,) = check_report(rep, Rules(max_syncs_per_step=1)).violations
    assert v.actual == 3 and v.evidence[:2] == ["step 1: 2 syncs", "step 2: 3 syncs"]
    assert any("/u/train.py:12" in e for e in v.evidence)
    assert check_report(rep, Rules(max_syncs_per_step=3)).passed


def test_fallbacks_and_slow_steps(tmp_path) -> None:
    events = [{"kind": "fallback_exec", "step": 3, "payload": FallbackExec("aten::nonzero"),
               "value": 3}]
    run = build_run(tmp_path / "r", steps=[{"wall_s": w, "compile_count": c} for w, c in
                                           [(2.0, 1), (0.1, 0), (0.1, 0), (0.9, 0)]],
                    events=events)
    result = check_report(build_report(run), Rules(no_fallbacks=True, max_step_seconds=0.5))
    by_rule = {v.rule: v for v in result.violations}
    assert by_rule["no-fallbacks"].actual == 3
    assert by_rule["no-fallbacks"].evidence == ["aten::nonzero: 3 executions in steps 3"]
    # step 0 compiled (not steady): only step 3 is slow
    assert by_rule["max-step-seconds"].evidence == ["step 3: 0.9000 s"]


@pytest.mark.parametrize("status,expected", [("failed", "failed"), ("running", "incomplete"),
                                             ("no_space", "no_space")])
def test_unfinished_runs_fail_the_gate_unless_allowed(tmp_path, status, expected) -> None:
    run = build_run(tmp_path / "r", steps=[{"wall_s": 0.1}], status=status if
                    status != "running" else "ok")
    if status == "running":
        meta = json.loads((tmp_path / "r" / "meta.json").read_text())
        meta["status"] = "running"
        (tmp_path / "r" / "meta.json").write_text(json.dumps(meta))
        run = load_run(tmp_path / "r")
    result = check_report(build_report(run), Rules())
    assert [v.rule for v in result.violations] == ["run-status"]
    assert result.violations[0].actual == expected
    relaxed = check_report(build_report(run), Rules(allow_incomplete=True))
    assert relaxed.passed
    assert any(expected in n and "--allow-incomplete" in n for n in relaxed.notes)


def test_cli_exit_codes_and_json(capsys, runs) -> None:
    dyn, static = runs["dynamic20"], runs["static20"]
    assert main(["check", str(dyn)]) == 1
    out = capsys.readouterr().out
    assert "FAIL max-recompiles: 19 recompilations in steady state" in out
    assert out.rstrip().endswith("result: FAIL (1 rule violated: max-recompiles)")
    assert main(["check", str(static), "--no-fallbacks", "--max-syncs-per-step", "0"]) == 0
    assert "result: PASS (2 rules checked)" in capsys.readouterr().out
    assert main(["check", str(dyn), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and data["violations"][0]["actual"] == 19
    assert data["rules"] == [
        {"rule": "max-recompiles", "passed": False,
         "description": "at most 0 recompilations in steady state"},
        {"rule": "no-barrier-loops", "passed": True,
         "description": "every loop ends its steps (no loop traced into one graph)"},
        {"rule": "no-memory-findings", "passed": True,
         "description": "no lost aliasing, no growing memory"}]
    # the old name of the rule still works
    assert main(["check", str(dyn), "--max-compiles-after-warmup", "19"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv", [["--max-recompiles", "-1"], ["--max-step-seconds", "0"],
                                  ["--max-syncs-per-step", "x"], ["--warmup-steps", "-2"]])
def test_cli_bad_limits(capsys, runs, argv) -> None:
    assert main(["check", str(runs["static20"]), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lazyscope: ") and len(err.strip().splitlines()) == 1


def test_cli_check_missing_run(capsys, tmp_path) -> None:
    assert main(["check", str(tmp_path / "nope")]) == 3
    assert "not a directory" in capsys.readouterr().err


def test_a_run_whose_files_are_damaged_fails_the_gate(tmp_path) -> None:
    """A measured value that is not a number (a damaged steps.bin) is a warning of the loader;
    the gate cannot vouch for what it lost, unless --allow-incomplete."""
    run = build_run(tmp_path / "r", steps=[{"wall_s": 0.1}] * 3)  # XLA: the rest is NaN
    rep = build_report(run)
    assert rep.summary.warnings
    (v,) = check_report(rep, Rules()).violations
    assert v.rule == "run-files" and "damaged" in v.message
    allowed = check_report(rep, Rules(allow_incomplete=True))
    assert allowed.passed and any("damaged" in n for n in allowed.notes)


def test_a_run_that_did_no_work_fails_the_gate_and_is_not_comparable(tmp_path) -> None:
    """A loop over a loader that died keeps reaching barriers: every step ran nothing on the
    device. The verdict says so, the gate fails (run-work), and a diff gives its times no
    ratio."""
    from lazyscope.analyze.diff import diff_reports

    quiet = {"wall_s": 4e-5, "t_end_s": 0.0, "compile_count": 0, "compile_s": 0.0,
             "execute_count": 0, "execute_s": 0.0, "to_device_count": 0, "to_device_bytes": 0,
             "to_device_s": 0.0, "from_device_count": 0, "from_device_bytes": 0,
             "from_device_s": 0.0, "fallback_count": 0}
    work = {**quiet, "wall_s": 0.2, "execute_count": 1, "execute_s": 0.15}
    idle = build_report(build_run(tmp_path / "idle", steps=[work] + [quiet] * 20))
    busy = build_report(build_run(tmp_path / "busy", steps=[work] * 21))
    assert idle.summary.idle == "its 21 steps ran 1 execution on the device in all"
    assert busy.summary.idle is None and not busy.summary.warnings
    assert "the run did no work" in idle.verdict and not idle.clean
    (v,) = check_report(idle, Rules()).violations
    assert v.rule == "run-work" and "did no work" in v.message
    assert check_report(busy, Rules()).passed
    diff = diff_reports(busy, idle)
    wall = next(m for m in diff.metrics if m.name == "wall_seconds")
    assert wall.ratio is None and wall.delta is not None
    assert any("not comparable" in w for w in diff.warnings)
    assert next(m for m in diff_reports(busy, busy).metrics
                if m.name == "wall_seconds").ratio == 1.0
