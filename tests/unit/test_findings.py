"""Analyzers (recompiles, syncs, fallbacks, findings) on synthetic runs: pure logic, no XLA."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.fallbacks import fallback_ops
from lazyscope.analyze.findings import findings
from lazyscope.analyze.recompiles import diff_graphs, explain_recompiles, recompile_fix
from lazyscope.analyze.syncs import sync_sites
from lazyscope.model import Event, Meta, Run, Site, Step
from lazyscope.render.json import report_dict
from lazyscope.render.text import render_text

TRAIN = Site("/u/train.py", 42, "<module>")


def compile_event(step: int, shapes: list[list[int]], *, digest: str = "", seconds: float = 1.0,
                  site: Site = TRAIN, dtypes: list[str] | None = None,
                  cause_kind: str = "barrier") -> Event:
    return Event("compile", step, seconds, site, [site], {
        "graph_hash": f"h{step}-{digest}-{shapes}", "num_inputs": len(shapes),
        "input_shapes": shapes, "input_dtypes": dtypes or ["f32"] * len(shapes),
        "ops": {"aten::mm": 1}, "ir_digest": digest or f"d{shapes}",
        "cause_kind": cause_kind, "cause": "step barrier"})


def make_run(events: list[Event], steps: int = 8,
             fallback: dict[int, dict[str, int]] | None = None) -> Run:
    return Run(Path("/tmp/none"), Meta(target="t", status="ok"),
               [Step(i, wall_s=0.1, fallback_ops=(fallback or {}).get(i, {}))
                for i in range(steps)], events)


def test_varying_dimension_named_with_its_range() -> None:
    lengths = [17, 33, 9, 61, 25, 48, 5, 40]
    run = make_run([compile_event(i, [[32, 32], [4, n, 32]]) for i, n in enumerate(lengths)])
    [site] = explain_recompiles(run)
    assert site.graphs == 8 and site.counted == 6 and site.counted_seconds == 6.0
    assert [v.text() for v in site.varying] == ["input 1 varies in dim 1 over 8 values in 5..61"]
    assert site.recompiles[0].diff == ["input 1 dim 1: 17 -> 33"]
    [f] = findings(run)
    assert f["kind"] == "recompile" and (f["file"], f["line"]) == ("/u/train.py", 42)
    assert f["count"] == 6 and f["seconds"] == 6.0
    assert "dim 1 over 8 values in 5..61" in f["detail"] and "bucket" in f["fix"]


def test_closest_graph_is_used_for_the_diff() -> None:
    run = make_run([compile_event(0, [[4, 8]]), compile_event(1, [[4, 16]]),
                    compile_event(2, [[2, 8]])])
    site = explain_recompiles(run)[0]
    assert site.recompiles[-1].diff == ["input 0 dim 0: 4 -> 2"]  # vs [4, 8], not [4, 16]


def test_partial_batch_fix_and_first_same_ir_repeat_is_settling() -> None:
    run = make_run([compile_event(0, [[4, 32]]), compile_event(2, [[2, 32]]),
                    compile_event(3, [[4, 32]])])
    [site] = explain_recompiles(run)
    assert [r.kind for r in site.recompiles] == ["shape", "same_ir"]
    assert site.counted == 1 and site.counted_steps == [2]
    [f] = findings(run)
    assert "drop_last=True" in f["fix"] and "over {2, 4}" in f["detail"]


def test_warmup_compiles_and_single_same_ir_are_no_findings() -> None:
    run = make_run([compile_event(0, [[8, 32]]), compile_event(2, [[8, 32]])])
    assert findings(run) == []
    site = explain_recompiles(run)[0]
    assert site.recompiles[0].kind == "same_ir" and not site.recompiles[0].counted


def test_repeated_same_ir_is_a_finding() -> None:
    run = make_run([compile_event(i, [[8, 32]]) for i in (0, 2, 3, 4)])
    [f] = findings(run)
    assert f["count"] == 2


def test_input_count_dtype_and_ir_diffs() -> None:
    a = compile_event(0, [[4]])
    assert diff_graphs(compile_event(1, [[4], [4]]), a) == ("input_count", ["input count 1 -> 2"])
    assert diff_graphs(compile_event(1, [[4]], dtypes=["bf16"]), a)[0] == "dtype"
    other = compile_event(1, [[4]], digest="other")
    other.data["ops"] = {"aten::mm": 1, "aten::add": 2}
    assert diff_graphs(other, a) == ("ir", ["graph differs: +2 aten::add"])


def test_same_graph_names_the_donated_buffers_when_they_differ() -> None:
    a = compile_event(0, [[4]], digest="g")
    b = compile_event(2, [[4]], digest="g")
    assert diff_graphs(b, a) == ("same_ir", ["same graph and input shapes"])
    a.data["buffer_donors"], b.data["buffer_donors"] = "", "(0, {})"
    assert diff_graphs(b, a) == ("same_ir", [
        "same graph and input shapes; donated input buffers {none} -> {(0, {})}"])


def test_sync_sites_recurring_only_are_findings() -> None:
    read = Site("/u/train.py", 30, "<module>")
    final = Site("/u/train.py", 50, "<module>")
    events = [Event("sync", i, 0.05, read, [read], {"read": ".item()", "executions": 1})
              for i in range(6)]
    events.append(Event("sync", 8, 0.01, final, [final], {"read": ".item()", "executions": 0}))
    run = make_run(events)
    sites = sync_sites(run)
    assert [(s.site.line, s.count, len(s.steps)) for s in sites] == [(30, 6, 6), (50, 1, 1)]
    [f] = findings(run)
    assert f["kind"] == "sync" and f["line"] == 30 and f["count"] == 6
    assert abs(f["seconds"] - 0.3) < 1e-9 and "6 execution(s)" in f["detail"]


def test_fallbacks_counts_from_steps_sites_from_events() -> None:
    site = Site("/u/train.py", 17, "<module>")
    events = [Event("fallback", 0, 0.5, site, [], {"op": "aten::histc", "calls": 1}),
              Event("fallback", 1, 0.02, site, [], {"op": "aten::histc", "calls": 1})]
    run = make_run(events, steps=6, fallback={i: {"aten::histc": 1} for i in range(6)})
    [op] = fallback_ops(run)
    assert op.count == 6 and op.steps == list(range(6)) and op.site == site
    assert abs(op.seconds - 0.12) < 1e-9  # the fastest sampled call x 6
    [f] = findings(run)
    assert f["kind"] == "fallback" and f["line"] == 17 and "histc" in f["fix"]


def test_findings_ranked_and_rendered() -> None:
    read = Site("/u/train.py", 30, "<module>")
    events = [compile_event(i, [[4, n]]) for i, n in enumerate([1, 2, 3, 4])]
    events += [Event("sync", i, 10.0, read, [read], {"read": ".item()"}) for i in range(4)]
    run = make_run(events)
    report = report_dict(run)
    assert [f["kind"] for f in report["findings"]] == ["sync", "recompile"]
    text = render_text(run)
    assert "findings (2, most expensive first):" in text
    assert text.rstrip("\n").splitlines()[-1].startswith("verdict: ")
    assert "findings: none after warm-up" in render_text(make_run([]))


def test_recompiles_without_recorded_shapes_say_so_in_the_fix() -> None:
    events = [compile_event(i, [[4]]) for i in range(5)]
    for event in events:
        for key in ("input_shapes", "input_dtypes", "ir_digest", "ops"):
            del event.data[key]
    [site] = explain_recompiles(make_run(events))
    assert site.counted_kinds == {"unknown": 3}
    assert "no input shapes were recorded" in recompile_fix(site)
