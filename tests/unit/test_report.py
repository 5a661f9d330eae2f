"""Summary, verdict and renderers on saved runs (tests/data): no XLA needed."""

from __future__ import annotations

import json

from lazyscope.analyze.summary import summarize, verdict
from lazyscope.model import load_run
from lazyscope.render import RENDERERS
from lazyscope.render.plots import write_timeline


def test_dynamic_summary(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    s = summarize(run)
    assert s["steps"] == 20 and s["compiles"] == 20 and s["compiles_after_warmup"] == 18
    assert s["recompile_steps"] == 18 and s["distinct_graphs"] == 20
    assert s["compile_seconds"] > 0 and s["median_step_seconds"] > 0
    assert verdict(s) == "recompiled on 18 of 18 steps after warm-up: the graph changes every step"


def test_static_summary(data_run) -> None:
    s = summarize(load_run(data_run("static20")))
    assert s["compiles"] == 1 and s["compiles_after_warmup"] == 0
    assert verdict(s).startswith("no recompilation after warm-up")


def test_json_has_required_keys(data_run) -> None:
    out = json.loads(RENDERERS["json"](load_run(data_run("dynamic20"))))
    for key in ("steps", "compiles", "compiles_after_warmup", "compile_seconds",
                "execute_seconds", "transfers_from_device", "fallback_ops",
                "median_step_seconds", "wall_seconds", "status"):
        assert key in out, key
    assert out["status"] == "ok" and len(out["per_step"]) == 20


def test_text_ends_with_verdict(data_run) -> None:
    text = RENDERERS["text"](load_run(data_run("dynamic20")))
    assert text.rstrip().splitlines()[-1].startswith("verdict: recompiled on 18 of 18")


def test_incomplete_run_verdict(data_run) -> None:
    path = data_run("dynamic20")
    meta = json.loads((path / "meta.json").read_text())
    meta["status"] = "running"
    (path / "meta.json").write_text(json.dumps(meta))
    s = summarize(load_run(path))
    assert s["status"] == "incomplete"
    assert verdict(s).startswith("incomplete run (20 finished steps)")


def test_timeline_png(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    png = write_timeline(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
