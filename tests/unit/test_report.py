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


def _compile_event(step: int, digest: str, shapes: list) -> dict:
    return {"kind": "compile", "step": step, "seconds": 0.1,
            "site": {"file": "train.py", "line": 9, "function": "<module>"},
            "data": {"graph_hash": f"h{step}", "ir_digest": digest, "input_shapes": shapes,
                     "input_dtypes": ["f32"] * len(shapes), "num_inputs": len(shapes),
                     "cause_kind": "barrier"}}


def _run_with_compiles(tmp_path, compiles: list[dict], steps: int = 6):
    from lazyscope.model import Event, Meta, RunWriter, Step

    writer = RunWriter(tmp_path / "r", Meta(target="train.py", target_kind="script"))
    by_step = {}
    for c in compiles:
        by_step[c["step"]] = by_step.get(c["step"], 0) + 1
        writer.write_event(Event.from_json(c))
    for i in range(steps):
        writer.write_step(Step(index=i, wall_s=0.01, compile_count=by_step.get(i, 0)))
    writer.finish("ok")
    return load_run(tmp_path / "r")


def test_identical_graph_recompile_is_called_settling(tmp_path) -> None:
    run = _run_with_compiles(tmp_path, [_compile_event(0, "d1", [[8, 32]]),
                                        _compile_event(2, "d1", [[8, 32]])])
    s = summarize(run)
    assert s["compiles_after_warmup"] == 1 and s["settling_recompiles"] == [2]
    assert verdict(s).startswith("no shape or code change after warm-up: the graph is static")


def test_shape_change_after_warmup_is_not_settling(tmp_path) -> None:
    run = _run_with_compiles(tmp_path, [_compile_event(0, "d1", [[8, 32]]),
                                        _compile_event(2, "d2", [[8, 40]])])
    s = summarize(run)
    assert s["settling_recompiles"] == []
    assert verdict(s).startswith("recompiled on 1 of 4 steps after warm-up")


def test_bucket_advice_in_every_report_of_a_recompiling_decoder_run(data_run) -> None:
    """A decoder run padded to the longest sequence recompiles on seq_len: the JSON, text and
    HTML reports carry the bucket advice; a static run carries none."""
    from lazyscope.render.html import write_html

    run = load_run(data_run("decoder_longest6"))
    report = json.loads(RENDERERS["json"](run))
    advice = report["advice"]
    assert advice["seq_len_values"] == 5 and advice["best"]["boundaries"]
    assert advice["best"]["boundaries"][-1] == advice["top"]
    assert "bucket advice: the padded sequence length took 5 values" in RENDERERS["text"](run)
    page = write_html(run).read_text()
    assert "Bucket advice" in page
    # every priced option is a row: each K of the DP, pow2, pad-to-max (and packing, which wins)
    for name in ("dp K=1", "dp K=2", "pow2", "pad to max", "packed"):
        assert f"<td>{name}</td>" in page, name
    assert "advice" not in json.loads(RENDERERS["json"](load_run(data_run("static20"))))


def test_growing_dimension_gets_an_accumulation_fix(tmp_path, data_run) -> None:
    from lazyscope.analyze.findings import findings

    grows = _run_with_compiles(tmp_path, [_compile_event(i, f"d{i}", [[i + 1]]) for i in range(6)])
    (finding,) = findings(grows)
    assert "grows at every compilation" in finding["fix"] and "torch.cat" in finding["fix"]
    # batch lengths that come and go get buckets, not the accumulation fix
    (longest,) = [f for f in findings(load_run(data_run("decoder_longest6")))
                  if f["kind"] == "recompile"]
    assert "bucket sizes" in longest["fix"] and "grows" not in longest["fix"]
