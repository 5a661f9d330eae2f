"""Exports on saved runs: the DataFrames (typed columns, not-measured as <NA>), Parquet and CSV
round trips, the Chrome trace's structure and placement rules, and one clear line for a missing
pandas/pyarrow or an unwritable output. The trace read back by the real Perfetto UI is
tests/integration/test_export.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lazyscope.analyze.report import build_report
from lazyscope.cli import main
from lazyscope.core.errors import MissingDependencyError
from lazyscope.model import EVENT_KINDS, STEP_FIELDS, runs_by_rank, user_site
from lazyscope.render.perfetto import PLACED_END, TRACKS, chrome_trace
from lazyscope.store import load_run, load_target
from tests.conftest import DATA, REPO

pd = pytest.importorskip("pandas")


# -- DataFrames ----------------------------------------------------------------------------


def test_steps_frame_typed(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    df = run.steps_frame()
    assert len(df) == len(run.steps) == 20
    assert list(df.columns[:3]) == ["step", "kind", "start_s"]
    assert list(df.columns[3:3 + len(STEP_FIELDS)]) == list(STEP_FIELDS)
    assert str(df["step"].dtype) == "int64" and str(df["kind"].dtype) == "category"
    for name in STEP_FIELDS:
        expected = "Int64" if name.endswith(("_count", "_bytes")) else "Float64"
        assert str(df[name].dtype) == expected, name
    np.testing.assert_allclose(df["wall_s"].to_numpy(float), run.steps.col("wall_s"))
    assert df["compile_count"].tolist() == [int(v) for v in run.steps.col("compile_count")]
    np.testing.assert_allclose(df["start_s"].to_numpy(float),
                               run.steps.col("t_end_s") - run.steps.col("wall_s"))
    assert df["kind"].eq("step").all()


def test_steps_frame_not_measured_is_na(data_run) -> None:
    """The compile backend measures no executions or transfers: <NA>, never 0."""
    run = load_run(data_run("compile/tour"))
    df = run.steps_frame()
    assert run.steps.col("execute_count") is None
    assert df["execute_count"].isna().all() and str(df["execute_count"].dtype) == "Int64"
    assert df["to_device_bytes"].isna().all()
    assert df["compile_count"].notna().all()
    assert int(df["compile_count"].sum()) == int(run.steps.total("compile_count",
                                                                with_tail=False))


def test_steps_frame_tail_and_annotations(tmp_path: Path) -> None:
    from lazyscope.model import Meta
    from lazyscope.store import RunWriter

    meta = Meta(target="t", backend="eager")
    meta.capabilities.step_fields = ["wall_s", "t_end_s", "compile_count"]
    writer = RunWriter(tmp_path / "run", meta)
    writer.write_step(0, {"wall_s": 0.5, "t_end_s": 0.5, "compile_count": 1},
                      annotations={"tokens": 64, "lengths": [3, 5]})
    writer.write_step(1, {"wall_s": 0.25, "t_end_s": 0.75, "compile_count": 0}, annotations={})
    writer.write_step(2, {"wall_s": 0.1, "t_end_s": 0.85, "compile_count": 0}, tail=True,
                      annotations={"wall_s": "clash"})
    writer.finish("ok", None)
    run = load_run(tmp_path / "run")
    df = run.steps_frame()
    assert len(df) == 2 and df["tokens"].tolist()[0] == 64 and pd.isna(df["tokens"][1])
    assert df["lengths"][0] == [3, 5]
    full = run.steps_frame(tail=True)
    assert full["kind"].tolist() == ["step", "step", "tail"]
    assert full["wall_s"].tolist() == [0.5, 0.25, 0.1]
    assert full["annotation_wall_s"].tolist()[2] == "clash"  # never overwrites a field
    assert full["execute_s"].isna().all()


def test_events_frame(data_run) -> None:
    run = load_run(data_run("compile/tour"))
    df = run.events_frame()
    ev = run.events
    assert len(df) == len(ev)
    assert list(df["kind"].cat.categories) == list(EVENT_KINDS)
    for kind in EVENT_KINDS:
        assert int((df["kind"] == kind).sum()) == ev.count(kind)
    assert str(df["line"].dtype) == "Int64" and str(df["file"].dtype) == "string"
    for i in range(len(ev)):
        e = ev.event(i)
        site = user_site(e.stack)
        if site is None:
            assert pd.isna(df["file"][i]) and pd.isna(df["line"][i])
        else:
            assert df["file"][i] == site.file and df["line"][i] == site.line
            assert df["function"][i] == site.function
        if e.kind == "compile":
            assert df["cause"][i] == e.data.cause and df["phase"][i] == e.data.phase
            assert df["graph"][i] == e.key
        if e.kind == "graph_break":
            assert df["cause"][i] == e.data.reason
    # the question the notebook answers: compile seconds per user line
    per_site = df[df["kind"] == "compile"].groupby(["file", "line"])["seconds"].sum()
    assert per_site.sum() == pytest.approx(float(ev.seconds[ev.mask("compile")].sum()))


def test_ranked_frames_have_a_rank_column(tmp_path: Path) -> None:
    for rank in (0, 1):
        shutil.copytree(DATA / "xla" / "dynamic20", tmp_path / f"rank{rank}")
    target = load_target(tmp_path)
    steps, events = target.steps_frame(), target.events_frame()
    assert list(steps.columns)[0] == "rank" and steps["rank"].tolist() == [0] * 20 + [1] * 20
    assert events["rank"].value_counts().to_dict() == {0: 20, 1: 20}
    assert str(events["kind"].dtype) == "category" and str(events["cause_kind"].dtype) == "category"


def test_model_imports_without_pandas() -> None:
    code = ("import sys; sys.modules['pandas'] = None; import lazyscope, lazyscope.model, "
            "lazyscope.cli; from lazyscope.store import load_run; "
            f"run = load_run({str(DATA / 'xla' / 'dynamic20')!r}); print(len(run.steps))\n"
            "try:\n    run.steps_frame()\nexcept Exception as e:\n"
            "    print(type(e).__name__, e.exit_code, e)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "20"
    assert lines[1].startswith("MissingDependencyError 4 pandas is not installed: pip install "
                               "'lazyscope[data]'")


# -- Parquet and CSV --------------------------------------------------------------------------


def test_parquet_round_trip(data_run, capsys) -> None:
    pytest.importorskip("pyarrow")
    path = data_run("compile/tour")
    assert main(["export", str(path), "--format", "parquet"]) == 0
    assert capsys.readouterr().out.split() == [str(path / "steps.parquet"),
                                               str(path / "events.parquet")]
    run = load_run(path)
    steps = pd.read_parquet(path / "steps.parquet")
    events = pd.read_parquet(path / "events.parquet")
    pd.testing.assert_frame_equal(steps, run.steps_frame(tail=True))
    pd.testing.assert_frame_equal(events, run.events_frame())
    assert str(steps["execute_count"].dtype) == "Int64" and steps["execute_count"].isna().all()


def test_csv_and_out_dir(data_run, tmp_path: Path, capsys) -> None:
    path = data_run("dynamic20")
    out = tmp_path / "tables"
    assert main(["export", str(path), "--format", "csv", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["events.csv", "steps.csv"]
    steps = pd.read_csv(out / "steps.csv")
    assert len(steps) == 20 and steps["compile_count"].sum() == 20
    events = pd.read_csv(out / "events.csv")
    assert (events["kind"] == "compile").sum() == 20


def test_missing_pandas_or_pyarrow_is_one_line(data_run, monkeypatch, capsys) -> None:
    path = data_run("dynamic20")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["export", str(path), "--format", "parquet"]) == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith("lazyscope: pyarrow is not installed") and "--format csv" in err
    assert len(err.splitlines()) == 1 and not (path / "steps.parquet").exists()
    monkeypatch.setitem(sys.modules, "pandas", None)
    assert main(["export", str(path), "--format", "csv"]) == 4
    err = capsys.readouterr().err.strip()
    assert err == ("lazyscope: pandas is not installed: pip install 'lazyscope[data]' "
                   "(pandas, and pyarrow for Parquet)")
    with pytest.raises(MissingDependencyError):
        load_run(path).events_frame()


def test_unwritable_output_is_one_line(data_run, tmp_path: Path, capsys) -> None:
    path = data_run("dynamic20")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for fmt, out, said in (("perfetto", blocker / "trace.json", "lazyscope: cannot write"),
                           ("csv", blocker, f"lazyscope: {blocker} exists and is not a directory")):
        assert main(["export", str(path), "--format", fmt, "--out", str(out)]) == 3
        err = capsys.readouterr().err.strip()
        assert err.startswith(said) and len(err.splitlines()) == 1, err
    assert main(["export", str(tmp_path / "nope"), "--format", "perfetto"]) == 3
    assert main(["export", str(path), "--format", "svg"]) == 2


# -- the Chrome trace ----------------------------------------------------------------------


def _trace(path: Path) -> dict:
    target = load_target(path)
    return chrome_trace({r: (run, build_report(run)) for r, run in runs_by_rank(target).items()})


def _slices(trace: dict, pid: int | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and
            (pid is None or e["pid"] == pid)]


@pytest.mark.parametrize("name", ["dynamic20", "compile/tour"])
def test_trace_steps_and_placement(data_run, name: str) -> None:
    path = data_run(name)
    run = load_run(path)
    trace = _trace(path)
    json.dumps(trace)  # serialisable as it is
    slices = _slices(trace)
    steps = [s for s in slices if s["cat"] == "step"]
    assert [s["name"] for s in steps] == [f"step {i}" for i in range(len(run.steps))]
    walls = run.steps.col("wall_s")
    ends = run.steps.col("t_end_s")
    origin = trace["traceEvents"][0]  # metadata first
    assert origin["ph"] == "M"
    for s, wall, end in zip(steps, walls, ends, strict=True):
        assert s["dur"] == pytest.approx(wall * 1e6, abs=1e-3)
        assert s["ts"] + s["dur"] == pytest.approx(end * 1e6, abs=2e-3)
    bounds = {s["args"]["step"]: (s["ts"], s["ts"] + s["dur"]) for s in steps}
    # every event slice lies inside its own step, says how it was placed, and slices of one
    # track never overlap (Perfetto would drop a slice that overlaps without nesting)
    by_track: dict[int, list[dict]] = {}
    for s in slices:
        if s["cat"] in ("step", "tail"):
            continue
        by_track.setdefault(s["tid"], []).append(s)
        assert s["args"]["placed"]
        if s["args"]["placed"] == PLACED_END:
            lo, hi = bounds[s["args"]["step"]]
            assert lo - 1e-3 <= s["ts"] and s["ts"] + s["dur"] <= hi + 1e-3, s
    for track in by_track.values():
        track.sort(key=lambda s: s["ts"])
        for a, b in zip(track, track[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
    compiles = [s for s in slices if s["cat"] == "compile"]
    assert len(compiles) == run.events.count("compile")
    assert sum(s["dur"] for s in compiles) == pytest.approx(
        float(run.events.seconds[run.events.mask("compile")].sum()) * 1e6, rel=1e-6)
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "compilations"]
    assert sum(c["args"]["per step"] for c in counters) == int(
        run.steps.total("compile_count", with_tail=False))
    for s in compiles:
        assert s["args"]["user_line"] and s["args"]["stack"] and s["args"]["cause"]


def test_trace_marks_findings_and_instants(data_run) -> None:
    path = data_run("compile/tour")
    run = load_run(path)
    report = build_report(run)
    trace = _trace(path)
    breaks = [e for e in trace["traceEvents"] if e.get("cat") == "graph_break"]
    assert len(breaks) == run.events.count("graph_break") >= 1
    assert all(e["ph"] == "i" for e in breaks)  # no duration is measured: never a slice
    marked = {e["args"].get("finding") for e in trace["traceEvents"] if e.get("args")}
    for n, f in enumerate(report.findings, 1):
        assert f"#{n} {f.kind} at {f.where}" in marked
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"steps", "compilations", "graph breaks"} <= threads
    assert threads <= set(TRACKS)
    # the compile backend measures no executions or transfers: no tracks for them
    assert not threads & {"executions", "transfers to device"}


def test_trace_one_process_per_rank(tmp_path: Path) -> None:
    for rank in (0, 1):
        shutil.copytree(DATA / "xla" / "dynamic20", tmp_path / f"rank{rank}")
    trace = _trace(tmp_path)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(names.values()) == ["rank 0: lazytensor-dynamic", "rank 1: lazytensor-dynamic"]
    for pid in names:
        assert len([s for s in _slices(trace, pid) if s["cat"] == "step"]) == 20
    assert trace["otherData"]["ranks"] == [0, 1]


def test_placement_rules(tmp_path: Path) -> None:
    """Durations are measured, starts are not: slices end at their step's end; slices that add
    up to more than the step start at its start; the next step's then wait for them; a
    zero-duration event is an instant, never a slice of invented length."""
    from lazyscope.model import Frame, Meta, Sync
    from lazyscope.render.perfetto import (
        PLACED_AFTER_PREVIOUS,
        PLACED_INSTANT,
        PLACED_START,
    )
    from lazyscope.store import RunWriter

    meta = Meta(target="t", backend="eager")
    meta.capabilities.step_fields = ["wall_s", "t_end_s"]
    writer = RunWriter(tmp_path / "run", meta)
    stack = (Frame("train.py", 7, "main"),)
    for step, (seconds, end) in enumerate([(1.5, 1.0), (0.8, 2.0), (0.1, 3.0)]):
        writer.write_event("sync", step, seconds=seconds, stack=stack,
                           payload=Sync(read=".item()"), key="", value=1)
        writer.write_step(step, {"wall_s": 1.0, "t_end_s": end}, annotations={})
    writer.write_event("sync", 2, seconds=0.0, stack=stack, payload=Sync(read="if t"), key="",
                       value=0)
    writer.finish("ok", None)
    trace = _trace(tmp_path / "run")
    syncs = [e for e in trace["traceEvents"] if e.get("cat") == "sync"]
    timed = [(e["ts"] / 1e6, e["dur"] / 1e6, e["args"]["placed"]) for e in syncs
             if e["ph"] == "X"]
    assert timed == [(0.0, 1.5, PLACED_START), (1.5, 0.8, PLACED_AFTER_PREVIOUS),
                     (2.9, 0.1, PLACED_END)]
    instant = [e for e in syncs if e["ph"] == "i"]
    assert len(instant) == 1 and instant[0]["args"]["placed"] == PLACED_INSTANT
    assert instant[0]["ts"] == 2.0e6 and "dur" not in instant[0]
    assert all(e["args"]["user_line"] == "train.py:7 (main)" for e in syncs)
