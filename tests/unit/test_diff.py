"""`lazyscope diff`: metric deltas/ratios and sites that appeared or disappeared."""

from __future__ import annotations

import json

from lazyscope.analyze.diff import diff_runs
from lazyscope.cli import main
from lazyscope.model import Event, Site, Step, load_run
from tests.unit.test_check import make_run


def _metric(diff: dict, name: str) -> dict:
    return next(m for m in diff["metrics"] if m["name"] == name)


def test_static_vs_dynamic(data_run) -> None:
    static, dyn = load_run(data_run("static20")), load_run(data_run("dynamic20"))
    d = diff_runs(static, dyn)
    comp = _metric(d, "compiles")
    assert (comp["a"], comp["b"], comp["delta"], comp["ratio"]) == (1, 20, 19, 20.0)
    after = _metric(d, "compiles_after_warmup")
    assert (after["a"], after["b"], after["ratio"]) == (0, 18, None)
    med = _metric(d, "median_step_seconds")
    assert med["ratio"] > 10  # 37.6 ms vs 0.35 ms in the saved runs
    site = "/repo/scenarios/lazytensor_dynamic.py:61"
    assert d["compile_sites"]["changed"] == [{"site": site, "a": 1, "b": 20}]
    assert d["compile_sites"]["appeared"] == [] == d["compile_sites"]["disappeared"]
    # the diff is antisymmetric in its deltas
    back = diff_runs(dyn, static)
    assert _metric(back, "compiles")["delta"] == -19


def test_sites_and_fallbacks_appear_and_disappear(tmp_path) -> None:
    s1, s2, s3 = Site("/u/t.py", 10, "f"), Site("/u/t.py", 20, "g"), Site("/u/t.py", 30, "h")
    a = make_run(tmp_path / "a", [Step(0, compile_count=1, fallback_ops={"aten::nonzero": 2})],
                 [Event("compile", 0, site=s1), Event("sync", 0, site=s2)])
    b = make_run(tmp_path / "b", [Step(0, compile_count=2, fallback_ops={"aten::unique": 1})],
                 [Event("compile", 0, site=s1), Event("compile", 0, site=s3)])
    d = diff_runs(load_run(a), load_run(b))
    assert d["compile_sites"]["appeared"] == [{"site": "/u/t.py:30", "a": 0, "b": 1}]
    assert d["compile_sites"]["disappeared"] == []
    assert d["sync_sites"]["disappeared"] == [{"site": "/u/t.py:20", "a": 1, "b": 0}]
    assert d["fallback_ops"]["appeared"] == [{"op": "aten::unique", "a": 0, "b": 1}]
    assert d["fallback_ops"]["disappeared"] == [{"op": "aten::nonzero", "a": 2, "b": 0}]
    assert _metric(d, "fallback_executions")["delta"] == -1


def test_cli_text_and_json(capsys, data_run) -> None:
    a, b = str(data_run("static20")), str(data_run("dynamic20"))
    assert main(["diff", a, b]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("compiles "))
    assert line.split() == ["compiles", "1", "20", "19", "20.00x"]
    assert "~ /repo/scenarios/lazytensor_dynamic.py:61  (A: 1 -> B: 20)" in out
    assert main(["diff", a, b, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["run_dir"] == a and data["b"]["steps"] == 20


def test_cli_diff_bad_run(capsys, data_run, tmp_path) -> None:
    assert main(["diff", str(data_run("static20")), str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "no meta.json" in err and len(err.strip().splitlines()) == 1
