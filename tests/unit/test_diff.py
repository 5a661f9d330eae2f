"""Run diffs: metric deltas and ratios, sites and findings that came or went."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyscope.analyze.diff import diff_reports
from lazyscope.analyze.report import build_report
from lazyscope.cli import main
from lazyscope.model import Compile, FallbackExec, Sync
from lazyscope.store import load_run
from tests.builders import build_run, frame


@pytest.fixture
def runs(data_run) -> dict[str, Path]:
    return {name: data_run(name) for name in ("dynamic20", "static20")}


def _metric(d: dict, name: str) -> dict:
    return next(m for m in d["metrics"] if m["name"] == name)


def test_static_vs_dynamic(runs) -> None:
    static = build_report(load_run(runs["static20"]))
    dyn = build_report(load_run(runs["dynamic20"]))
    d = diff_reports(static, dyn)
    comp = _metric(d, "compiles")
    assert (comp["a"], comp["b"], comp["delta"], comp["ratio"]) == (1, 20, 19, 20.0)
    rec = _metric(d, "recompiles")
    assert (rec["a"], rec["b"], rec["ratio"]) == (0, 19, None)
    assert _metric(d, "median_step_seconds")["ratio"] > 5
    assert any(s["a"] == 1 and s["b"] == 20 for s in d["compile_sites"]["changed"])
    assert [f for f in d["findings"]["appeared"] if f.startswith("recompile at ")]
    assert _metric(diff_reports(dyn, static), "compiles")["delta"] == -19


def test_a_metric_one_side_does_not_measure_has_no_delta(tmp_path, runs) -> None:
    xla = build_report(load_run(runs["static20"]))
    torch = build_report(build_run(tmp_path / "t", backend="compile", steps=[{"wall_s": 0.1}]))
    m = _metric(diff_reports(xla, torch), "executions")
    assert m["b"] is None and m["delta"] is None and m["ratio"] is None


def test_sites_and_fallbacks_appear_and_disappear(tmp_path) -> None:
    f1, f2, f3 = frame("/u/t.py", 10, "f"), frame("/u/t.py", 20, "g"), frame("/u/t.py", 30, "h")
    a = build_run(tmp_path / "a", steps=[{"wall_s": 0.1, "compile_count": 1}], events=[
        {"kind": "compile", "stack": (f1,), "payload": Compile(), "key": "a"},
        {"kind": "sync", "stack": (f2,), "payload": Sync(read="x")},
        {"kind": "fallback_exec", "payload": FallbackExec("aten::nonzero"), "value": 2}])
    b = build_run(tmp_path / "b", steps=[{"wall_s": 0.1, "compile_count": 2}], events=[
        {"kind": "compile", "stack": (f1,), "payload": Compile(), "key": "a"},
        {"kind": "compile", "stack": (f3,), "payload": Compile(), "key": "b"},
        {"kind": "fallback_exec", "payload": FallbackExec("aten::unique"), "value": 1}])
    d = diff_reports(build_report(a), build_report(b))
    assert d["compile_sites"]["appeared"] == [{"site": "/u/t.py:30", "a": 0, "b": 1}]
    assert d["compile_sites"]["disappeared"] == []
    assert d["sync_sites"]["disappeared"] == [{"site": "/u/t.py:20", "a": 1, "b": 0}]
    assert d["fallback_ops"]["appeared"] == [{"op": "aten::unique", "a": 0, "b": 1}]
    assert d["fallback_ops"]["disappeared"] == [{"op": "aten::nonzero", "a": 2, "b": 0}]
    assert _metric(d, "fallback_executions")["delta"] == -1


def test_cli_text_and_json(capsys, runs) -> None:
    a, b = str(runs["static20"]), str(runs["dynamic20"])
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("compiles "))
    assert line.split() == ["compiles", "1", "20", "19", "20.00x"]
    assert "lazytensor_dynamic.py:65  (A: 1 -> B: 20)" in out
    assert main(["diff", a, b, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["run_dir"] == a and data["b"]["steps"] == 20


def test_cli_diff_bad_run(capsys, runs, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["diff", str(runs["static20"]), str(tmp_path / "empty")]) == 3
    err = capsys.readouterr().err
    assert "no meta.json" in err and len(err.strip().splitlines()) == 1
