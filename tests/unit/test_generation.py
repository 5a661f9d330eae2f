"""``generate()`` under XLA, on runs written by lazyscope's own writer: a site whose calls keep
compiling graphs inside transformers' generation loop is one recompile finding at the user's
``generate`` line, with the static-cache fixes transformers documents, and the recompile
findings and notes of that site are its; a site whose later calls reuse the first call's graphs
(a static cache, one prompt length) has none. A CPU fallback counted in steps the watch window
did not look at is placed at the user's line that called into the library."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.fallbacks import fallback_ops
from lazyscope.analyze.generation import generation_sites, with_generation
from lazyscope.analyze.report import build_report
from lazyscope.model import Compile, Fallback, FallbackExec, Sync
from tests.builders import build_run, frame

GEN = "/venv/site-packages/transformers/generation/utils.py"
USER = "/work/eval.py"
CALL = frame(USER, 57, "<module>")


def _stack(*functions: str) -> list:
    return [*(frame(GEN, 100 + i, f, library=True) for i, f in enumerate(functions)), CALL]


def _call(step: int, prefix: str, tokens: int, start: int = 0) -> list[dict]:
    """One generate() call's compile events: the prompt's graph, then two per token."""
    out = [{"kind": "compile", "step": step, "seconds": 1.0, "key": f"{prefix}-prefill",
            "stack": _stack("_prefill", "_sample", "generate"),
            "payload": Compile(phase="graph", cause="value read", cause_kind="value_read")}]
    for t in range(start, tokens):
        for part in ("mask", "step"):
            out.append({"kind": "compile", "step": step, "seconds": 1.0,
                        "key": f"{prefix}-{part}{t}", "stack": _stack("_sample", "generate"),
                        "payload": Compile(phase="graph", cause="value read",
                                           cause_kind="value_read")})
    return out


def _executions(events: list[dict], times: int = 1) -> list[dict]:
    """Each compiled graph run in its step and in the ``times - 1`` steps after it (a call
    a step)."""
    return [{"kind": "execute", "step": e["step"] + i, "key": e["key"], "value": 1.0}
            for e in events if e["kind"] == "compile" for i in range(times)]


def test_calls_that_keep_compiling_are_one_finding_at_the_generate_line(tmp_path: Path) -> None:
    # three calls of 6 tokens in one step (no barrier between them): prompts of other lengths
    compiles = [*_call(0, "a", 6), *_call(0, "b", 6), *_call(0, "c", 6)]
    run = build_run(tmp_path / "dynamic", steps=[{"wall_s": 40.0}],
                    events=[*compiles, *_executions(compiles)])
    (g,) = generation_sites(run, 40.0)
    assert (g.site.file, g.site.line) == (USER, 57)
    assert g.calls == 3 and g.graphs == 39 and g.new_later == 26 and g.once == 39
    report = build_report(run)
    (f,) = [f for f in report.findings if f.kind == "recompile"]
    assert (f.file, f.line) == (USER, 57) and f.count == 26
    assert 'cache_implementation="static"' in f.fix and "max_new_tokens" in f.fix
    assert "padding=\"max_length\"" in f.fix and "39 graphs in 3 calls" in f.detail
    assert report.verdict.startswith("recompiles in steady state")
    assert not [n for n in report.notes if (n.file, n.line) == (USER, 57)]


def test_calls_that_reuse_the_first_calls_graphs_are_no_finding(tmp_path: Path) -> None:
    # a static cache and one prompt length: the first call compiles, the next two reuse
    first = _call(0, "s", 6)
    run = build_run(tmp_path / "static", steps=[{"wall_s": 20.0}] * 3,
                    events=[*first, *_executions(first, times=3)])
    (g,) = generation_sites(run, 60.0)
    assert g.calls == 1 and g.new_later == 0
    report = build_report(run)
    assert not [f for f in report.findings if f.kind == "recompile"], report.findings
    findings, notes = with_generation("xla", run, [], [])
    assert (findings, notes) == ([], [])


def test_a_fallback_the_window_did_not_see_is_placed_at_the_users_call(tmp_path: Path) -> None:
    lib = frame("/venv/site-packages/transformers/generation/stopping_criteria.py", 592,
                "__call__", library=True)
    other = frame("/work/eval.py", 80, "<module>")
    events = [
        # warm-up: an op the window saw keeps its own line
        {"kind": "fallback", "step": 0, "stack": [frame(USER, 12, "<module>")],
         "payload": Fallback(op="aten::median"), "value": 1, "seconds": 0.001},
        {"kind": "fallback_exec", "step": 0, "payload": FallbackExec("aten::median"),
         "value": 1},
        # later: isin counted, no site; the reads inside transformers in that step went
        # through line 57 (and one plain read at line 80)
        {"kind": "fallback_exec", "step": 4, "payload": FallbackExec("aten::isin.Tensor_Tensor"),
         "value": 9},
        *({"kind": "sync", "step": 4, "stack": [lib, CALL],
           "payload": Sync(read="if tensor / bool(tensor)"), "value": 1} for _ in range(3)),
        {"kind": "sync", "step": 4, "stack": [other], "payload": Sync(read=".item()"),
         "value": 1},
    ]
    run = build_run(tmp_path / "fallback", steps=[{"wall_s": 1.0}] * 5, events=events)
    ops = {op.op: op for op in fallback_ops(run)}
    isin = ops["aten::isin.Tensor_Tensor"].site
    assert isin is not None and (isin.site.file, isin.site.line) == (USER, 57)
    assert isin.library == "transformers" and "3 reads" in isin.via
    median = ops["aten::median"].site
    assert median is not None and median.site.line == 12 and not median.library
    report = build_report(run)
    (f,) = [f for f in report.findings if f.kind == "fallback" and "isin" in f.detail]
    assert (f.file, f.line) == (USER, 57) and "inside transformers" in f.fix
