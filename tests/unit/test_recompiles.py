"""Recompile analysis on runs built in memory (pure logic): graphs compared by content, the
closest graph of a site, first/structure/variant/identical/evicted, and what counts."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.findings import make_findings
from lazyscope.analyze.recompiles import (
    EVICTED,
    FIRST,
    IDENTICAL,
    STRUCTURE,
    VARIANT,
    explain_recompiles,
)
from lazyscope.model import Change, Compile, GraphInput
from tests.builders import build_run, frame

BARRIER = (frame("/site-packages/torch_xla/torch_xla.py", 87, "sync", library=True),
           frame("/work/train.py", 30, "main"))
ORIGIN = frame("/work/train.py", 17, "")


def graph(*inputs: tuple[str, list[int]], ops: dict | None = None, digest: str = "",
          origin: bool = False, constants: list[str] | None = None) -> Compile:
    return Compile(cause_kind="barrier", inputs=[
        GraphInput(d, s, origin=ORIGIN if origin and len(s) == 3 else None) for d, s in inputs],
        ops=ops or {"dot": 1}, digest=digest or repr((inputs, ops, constants)),
        constants=constants)


PARAMS = [("f32", [32, 32]), ("f32", [32])]
MOMENTUM = [("f32", [32, 32]), ("f32", [32])]


def compiles_run(tmp: Path, graphs: list[tuple[int, str, Compile]], **kw):
    steps = max(s for s, _, _ in graphs) + 1
    events = [{"kind": "compile", "step": s, "seconds": 1.0, "stack": BARRIER, "payload": c,
               "key": key} for s, key, c in graphs]
    return build_run(tmp, steps=[{"wall_s": 0.1, "compile_count": 0}] * steps, events=events,
                     **kw)


def classes(run) -> dict[str, int]:
    (site,) = explain_recompiles(run)
    return site.classes


def test_reordered_parameters_are_the_same_graph(tmp_path: Path) -> None:
    a = graph(("f32", [4, 8]), *PARAMS, digest="same")
    b = graph(*reversed(PARAMS), ("f32", [4, 8]), digest="same")
    run = compiles_run(tmp_path / "r", [(0, "h0", a), (1, "h1", b)])
    assert classes(run) == {FIRST: 1, IDENTICAL: 1}


def test_a_cast_is_a_dtype_change_not_a_varying_batch(tmp_path: Path) -> None:
    a = graph(*PARAMS, ("f32", [8, 16]))
    b = graph(("bf16", [8, 16]), *PARAMS)  # XLA put the cast input first
    run = compiles_run(tmp_path / "r", [(0, "h0", a), (3, "h1", b)])
    (site,) = explain_recompiles(run)
    (rec,) = site.recompiles
    assert rec.cls == VARIANT
    assert [(c.what, c.before, c.after) for c in rec.changes] == [("dtype", "f32", "bf16")]
    findings, notes = make_findings("xla", sites=[site], syncs=[], fallbacks=[], breaks=[],
                                    eagers=[], steps=4)
    assert not findings and len(notes) == 1  # one recompile: a note, not a finding
    assert "dtype" in notes[0].fix and "drop_last" not in notes[0].fix


def test_optimizer_state_and_an_eval_graph_are_structure_not_recompiles(tmp_path: Path) -> None:
    first = graph(("f32", [4, 32]), *PARAMS)
    with_state = graph(("f32", [4, 32]), *PARAMS, *MOMENTUM, ops={"dot": 1, "multiply": 4})
    evaluation = graph(("f32", [4, 32]), *PARAMS, ops={"dot": 1, "maximum": 1})
    run = compiles_run(tmp_path / "r", [(0, "a", first), (1, "b", with_state),
                                        (10, "c", evaluation)])
    (site,) = explain_recompiles(run)
    assert site.classes == {FIRST: 1, STRUCTURE: 2}
    assert site.counted_count == 0


def test_a_varying_dimension_is_counted_and_names_its_origin(tmp_path: Path) -> None:
    graphs = [(i, f"h{n}", graph(("f32", [4, n, 32]), *PARAMS, origin=True))
              for i, n in enumerate([17, 33, 9, 61])]
    run = compiles_run(tmp_path / "r", graphs)
    (site,) = explain_recompiles(run)
    assert site.classes == {FIRST: 1, VARIANT: 3} and site.counted_count == 3
    (v,) = site.varying
    assert (v.what, v.index, v.values) == ("dim", 1, [9, 17, 33, 61])
    assert v.input == "the f32[4,?,32] input" and not v.growing
    assert site.origin == ORIGIN
    findings, _ = make_findings("xla", sites=[site], syncs=[], fallbacks=[], breaks=[],
                                eagers=[], steps=4)
    (f,) = findings
    assert (f.kind, f.file, f.line) == ("recompile", "/work/train.py", 17)
    assert f.compiled_at.line == 30 and f.count == 3 and f.steps == [1, 2, 3]
    assert "bucket" in f.fix and f.changes[0].what == "dim"


def test_a_growing_dimension_is_an_accumulation(tmp_path: Path) -> None:
    graphs = [(i, f"h{i}", graph(("f32", [i + 1]), ("f32", [512, 8]))) for i in range(5)]
    (site,) = explain_recompiles(compiles_run(tmp_path / "r", graphs))
    assert site.varying[0].growing
    (f,), _ = make_findings("xla", sites=[site], syncs=[], fallbacks=[], breaks=[], eagers=[],
                            steps=5)
    assert "accumulated" in f.fix


def test_a_special_scalar_is_named(tmp_path: Path) -> None:
    lr = ("f32", [])
    before = graph(*PARAMS, lr, ops={"multiply": 2})
    after = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:0"])
    (site,) = explain_recompiles(compiles_run(tmp_path / "r", [(0, "a", before),
                                                                (5, "b", after)]))
    (rec,) = site.recompiles
    assert rec.cls == VARIANT and "special scalar" in rec.changes[0].text


def test_a_graph_compiled_again_is_an_eviction_and_counts(tmp_path: Path) -> None:
    a, b = graph(("f32", [4, 8])), graph(("f32", [4, 9]))
    run = compiles_run(tmp_path / "r", [(0, "A", a), (1, "B", b), (2, "A", a), (3, "B", b),
                                        (4, "A", a)])
    (site,) = explain_recompiles(run)
    assert site.classes == {FIRST: 1, VARIANT: 1, EVICTED: 3}
    assert site.counted_count == 4 and list(site.counted_steps) == [1, 2, 3, 4]


def test_a_fixed_warmup_counts_every_compilation_after_it(tmp_path: Path) -> None:
    first = graph(("f32", [4, 32]), *PARAMS)
    with_state = graph(("f32", [4, 32]), *PARAMS, *MOMENTUM, ops={"dot": 1, "multiply": 4})
    run = compiles_run(tmp_path / "r", [(0, "a", first), (1, "b", with_state)],
                       warmup_steps=1)
    (site,) = explain_recompiles(run)
    assert site.counted_count == 1


def test_backend_reported_changes_and_backward_compiles(tmp_path: Path) -> None:
    """torch.compile: the guards say what changed; a backward compile joins its forward's site
    (its time is shown apart, it is not a recompile of its own)."""
    call = (frame("/work/train.py", 40, "main"),)
    fn = "forward (/work/model.py:17)"
    events = [
        {"kind": "compile", "step": 0, "seconds": 2.0, "stack": call, "key": "0/0",
         "payload": Compile(phase="forward", cause_kind="first", function=fn)},
        {"kind": "compile", "step": 0, "seconds": 1.0, "key": "0/0 backward",
         "payload": Compile(phase="backward", function=fn, forward_of="0/0")},
    ]
    for i, (n, m) in enumerate([(11, 19), (19, 13)], start=1):
        events.append({"kind": "compile", "step": i, "seconds": 2.0, "stack": call,
                       "key": f"0/{i}", "payload": Compile(
                           phase="forward", cause_kind="recompile", function=fn,
                           changes=[Change("x", "dim", 1, n, m)])})
    run = build_run(tmp_path / "r", backend="compile", events=events,
                    steps=[{"wall_s": 0.1, "compile_count": 1}] * 3)
    (site,) = explain_recompiles(run)
    assert site.phase == "forward" and site.backward_seconds == 1.0
    assert site.counted_count == 2 and site.varying[0].input == "x"
    (f,), _ = make_findings("compile", sites=[site], syncs=[], fallbacks=[], breaks=[],
                            eagers=[], steps=3)
    assert (f.file, f.line) == ("/work/train.py", 40)
    assert f.compiled_at.file == "/work/model.py" and f.compiled_at.line == 17
    assert "mark_dynamic" in f.fix and "xla" not in f.fix.lower()


def test_library_graphs_are_not_the_programs(tmp_path: Path) -> None:
    mine = graph(("f32", [4, 8]))
    theirs = Compile(cause_kind="internal", owner="library", inputs=[GraphInput("s64", [1])])
    theirs2 = Compile(cause_kind="internal", owner="library", inputs=[GraphInput("f32", [1])])
    run = compiles_run(tmp_path / "r", [(0, "a", mine), (3, "x", theirs), (4, "y", theirs2)])
    (site,) = explain_recompiles(run)
    assert site.compiles == 1 and site.counted_count == 0


def test_a_length_that_cycles_back_is_not_called_growing(tmp_path: Path) -> None:
    lengths = [3, 4, 5, 6, 7]
    graphs = [(i, f"h{n}", graph(("f32", [8, n]), *PARAMS)) for i, n in enumerate(lengths)]
    grow = compiles_run(tmp_path / "grow", graphs)
    findings, _ = make_findings("xla", sites=explain_recompiles(grow), syncs=[], fallbacks=[],
                                breaks=[], eagers=[], steps=len(graphs))
    assert "grows at every compilation" in findings[0].fix
    # the same lengths again: the cache dropped them and they were compiled again
    again = [(len(graphs) + i, key, g) for i, (_, key, g) in enumerate(graphs)]
    cycle = compiles_run(tmp_path / "cycle", graphs + again)
    (site,) = explain_recompiles(cycle)
    assert site.classes[EVICTED] == len(lengths)
    findings, _ = make_findings("xla", sites=[site], syncs=[], fallbacks=[], breaks=[],
                                eagers=[], steps=2 * len(graphs))
    assert "grows" not in findings[0].fix and "dim 1" in findings[0].fix


def test_a_constant_that_becomes_a_scalar_input_is_state_not_a_recompile(tmp_path: Path) -> None:
    """An accumulator set to torch.zeros(()) before a phase: the constant 0 in the phase's
    first graph, the previous step's result (a scalar input) in the next, like optimizer state.
    A scalar input that becomes the constant 1 again is a special-scalar recompile."""
    first = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:0"])
    state = graph(*PARAMS, ("f32", []), ops={"multiply": 2})
    one = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:1"])
    run = compiles_run(tmp_path / "r", [(0, "a", first), (1, "b", state), (2, "c", one)])
    (site,) = explain_recompiles(run)
    by_step = {r.step: r for r in site.recompiles}
    assert by_step[1].cls == STRUCTURE
    assert "became a scalar input" in by_step[1].changes[0].text
    assert by_step[2].cls == VARIANT and site.counted_count == 1
