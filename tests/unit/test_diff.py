"""Run diffs: metric deltas and ratios, sites and findings that came, went or moved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyscope.analyze.diff import OpChange, RunDiff, SiteChange, diff_reports
from lazyscope.analyze.report import build_report
from lazyscope.cli import main
from lazyscope.model import SOURCES_KEY, Compile, FallbackExec, SourceMap, Sync
from lazyscope.model.codec import encode
from lazyscope.model.payloads import GraphMemory
from lazyscope.store import load_run
from tests.builders import build_run, frame


@pytest.fixture
def runs(data_run) -> dict[str, Path]:
    return {name: data_run(name) for name in ("dynamic20", "static20")}


def test_static_vs_dynamic(runs) -> None:
    static = build_report(load_run(runs["static20"]))
    dyn = build_report(load_run(runs["dynamic20"]))
    d = diff_reports(static, dyn)
    assert isinstance(d, RunDiff)
    comp = d.metric("compiles")
    assert (comp.a, comp.b, comp.delta, comp.ratio) == (1, 20, 19, 20.0)
    rec = d.metric("recompiles")
    assert (rec.a, rec.b, rec.ratio) == (0, 19, None)
    assert d.metric("median_step_seconds").ratio > 5
    assert any(s.a == 1 and s.b == 20 for s in d.compile_sites.changed)
    assert [f for f in d.findings.appeared if f.startswith("recompile at ")]
    assert diff_reports(dyn, static).metric("compiles").delta == -19


def test_a_metric_one_side_does_not_measure_has_no_delta(tmp_path, runs) -> None:
    xla = build_report(load_run(runs["static20"]))
    torch = build_report(build_run(tmp_path / "t", backend="compile", steps=[{"wall_s": 0.1}]))
    m = diff_reports(xla, torch).metric("executions")
    assert m.b is None and m.delta is None and m.ratio is None


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
    assert d.compile_sites.appeared == [SiteChange("/u/t.py:30", 0, 1)]
    assert d.compile_sites.disappeared == []
    assert d.sync_sites.disappeared == [SiteChange("/u/t.py:20", 1, 0)]
    assert d.fallback_ops.appeared == [OpChange("aten::unique", 0, 1)]
    assert d.fallback_ops.disappeared == [OpChange("aten::nonzero", 2, 0)]
    assert d.metric("fallback_executions").delta == -1
    out = encode(d)  # the JSON keeps its shape: site (op) / a / b under each change kind
    assert out["compile_sites"]["appeared"] == [{"site": "/u/t.py:30", "a": 0, "b": 1}]
    assert out["fallback_ops"]["disappeared"] == [{"op": "aten::nonzero", "a": 2, "b": 0}]
    assert out["compile_sites"]["moved"] == []


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


# -- an edited script: sites matched by function and source text -------------------------------

BEFORE = ["import torch", "def train():", "    for i in range(3):",
          "        loss = step(i)", "        print(loss.item())", "        sync()"]


def _sources(path: str, lines: list[str]) -> dict:
    return {SOURCES_KEY: SourceMap(lines={path: {n: t.strip() for n, t in enumerate(lines, 1)
                                                  if t.strip()}}).to_json()}


def _edited_runs(tmp_path, *, record_a: bool = True, record_b: bool = True):
    """A: the script above; B: the same script with two lines added at its top, the sync count
    doubled at .item() and the barrier line gone."""
    path = "/u/train.py"
    after = ["# a comment", "import os", *BEFORE[:5], "        log(i)"]
    def events(item_line: int, barrier_line: int | None, reads: int) -> list[dict]:
        out = [{"kind": "sync", "stack": (frame(path, item_line, "train"),),
                "payload": Sync(read=".item()")} for _ in range(reads)]
        if barrier_line:
            out.append({"kind": "compile", "stack": (frame(path, barrier_line, "train"),),
                        "payload": Compile(), "key": "g"})
        return out
    a = build_run(tmp_path / "a", steps=[{"wall_s": 0.1}], events=events(5, 6, 1),
                  info=_sources(path, BEFORE) if record_a else None)
    b = build_run(tmp_path / "b", steps=[{"wall_s": 0.1}], events=events(7, None, 2),
                  info=_sources(path, after) if record_b else None)
    return build_report(a), build_report(b)


def test_a_moved_line_is_moved_not_added_and_removed(tmp_path) -> None:
    a, b = _edited_runs(tmp_path)
    d = diff_reports(a, b)
    assert d.sync_sites.moved == [SiteChange("/u/train.py:7", 1, 2, moved_from="/u/train.py:5",
                                             text="print(loss.item())")]
    assert not d.sync_sites.appeared and not d.sync_sites.disappeared
    # line 6 of A was the barrier; line 6 of B is another line (`print(...)` moved there): the
    # barrier's compile site went away, it did not become line 6 of B
    assert d.compile_sites.disappeared == [SiteChange("/u/train.py:6", 1, 0, text="sync()")]
    text = main_text(a, b)
    assert "  > /u/train.py:7  (moved from /u/train.py:5; A: 1 -> B: 2)  print(loss.item())" \
        in text


def test_runs_without_source_text_match_by_line(tmp_path) -> None:
    a, b = _edited_runs(tmp_path, record_a=False)  # A made before lazyscope recorded sources
    d = diff_reports(a, b)
    assert d.sync_sites.moved == []
    assert d.sync_sites.disappeared == [SiteChange("/u/train.py:5", 1, 0)]
    assert d.sync_sites.appeared == [SiteChange("/u/train.py:7", 0, 2,
                                                text="print(loss.item())")]


def test_the_same_line_edited_is_a_new_site(tmp_path) -> None:
    path = "/u/t.py"
    runs = []
    for name, text in (("a", "x = y.item()"), ("b", "x = y.tolist()")):
        runs.append(build_report(build_run(
            tmp_path / name, steps=[{"wall_s": 0.1}],
            events=[{"kind": "sync", "stack": (frame(path, 3, "f"),), "payload": Sync(read="r")}],
            info=_sources(path, ["a", "b", text]))))
    d = diff_reports(*runs)
    assert [c.site for c in d.sync_sites.appeared] == [f"{path}:3"]
    assert [c.site for c in d.sync_sites.disappeared] == [f"{path}:3"]


def main_text(a, b) -> str:
    from lazyscope.render.diff import render_diff_text

    return render_diff_text(diff_reports(a, b))


def test_the_largest_graphs_memory_is_a_row(tmp_path, capsys) -> None:
    def run(name: str, mib: int) -> Path:
        memory = GraphMemory(inputs=mib << 20, outputs=mib << 20, intermediates=mib << 20)
        build_run(tmp_path / name, steps=[{"wall_s": 0.1, "compile_count": 1}], events=[
            {"kind": "compile", "stack": (frame("/u/t.py", 10, "f"),),
             "payload": Compile(memory=memory, digest=name), "key": name}])
        return tmp_path / name

    a, b = run("a", 1), run("b", 4)
    d = diff_reports(build_report(load_run(a)), build_report(load_run(b)))
    m = d.metric("graph_memory_bytes")
    assert (m.a, m.b, m.ratio) == (3 << 20, 12 << 20, 4.0)
    assert main(["diff", str(a), str(b)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.strip().startswith("graph_memory_bytes "))
    assert line.split() == ["graph_memory_bytes", "3.0", "MiB", "12.0", "MiB", "9.0", "MiB",
                            "4.00x"]
