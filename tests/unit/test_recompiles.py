"""The recompile analysis on runs built in memory (pure logic): graphs grouped into families,
judged by reuse (executions per graph), explained against the closest earlier graph of their
family; each test pins one clause of the rule in ``lazyscope/analyze/recompiles.py``."""

from __future__ import annotations

import random
from pathlib import Path

from lazyscope.analyze.findings import RecompileFacts, ReuseFacts, make_findings
from lazyscope.analyze.recompiles import (
    CHURN,
    CHURN_ONE_SHOTS,
    EVICTED,
    FIRST,
    IDENTICAL,
    LATE,
    REUSED,
    SINGLE,
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


def compiles_run(tmp: Path, graphs: list[tuple[int, str, Compile]],
                 runs: dict[str, list[int]] | None = None, steps: int | None = None, **kw):
    """A run with these compilations and, when ``runs`` is given, the steps each graph
    executed in (its execute events); each step's compile count matches its compilations."""
    n = steps or max([s for s, _, _ in graphs] + [s for v in (runs or {}).values() for s in v]) + 1
    events = [{"kind": "compile", "step": s, "seconds": 1.0, "stack": BARRIER, "payload": c,
               "key": key} for s, key, c in graphs]
    for key, executed in (runs or {}).items():
        events += [{"kind": "execute", "step": s, "key": key, "value": 1} for s in executed]
    per_step = [0] * n
    for s, _, _ in graphs:
        per_step[s] += 1
    return build_run(tmp, steps=[{"wall_s": 0.1, "compile_count": c} for c in per_step],
                     events=events, **kw)


def findings_of(run):
    return make_findings("xla", sites=explain_recompiles(run), syncs=[], fallbacks=[],
                         breaks=[], eagers=[], steps=len(run.steps))


# --------------------------------------------------------------------------- explanation


def test_reordered_parameters_are_the_same_graph(tmp_path: Path) -> None:
    a = graph(("f32", [4, 8]), *PARAMS, digest="same")
    b = graph(*reversed(PARAMS), ("f32", [4, 8]), digest="same")
    (fam,) = explain_recompiles(compiles_run(tmp_path / "r", [(0, "h0", a), (1, "h1", b)]))
    assert fam.classes == {FIRST: 1, IDENTICAL: 1}


def test_a_cast_is_a_dtype_change_not_a_varying_batch(tmp_path: Path) -> None:
    a = graph(*PARAMS, ("f32", [8, 16]))
    b = graph(("bf16", [8, 16]), *PARAMS)  # XLA put the cast input first
    run = compiles_run(tmp_path / "r", [(0, "h0", a), (5, "h1", b)])
    (fam,) = explain_recompiles(run)
    (rec,) = fam.recompiles
    assert rec.cls == VARIANT
    assert [(c.what, c.before, c.after) for c in rec.changes] == [("dtype", "f32", "bf16")]
    findings, notes = findings_of(run)
    # one variant after the run's quiet steps: a one-off, a note, not a finding
    assert not findings and len(notes) == 1 and fam.verdict == LATE
    assert "dtype" in notes[0].fix and "drop_last" not in notes[0].fix


def test_optimizer_state_and_an_eval_graph_are_other_families_never_diffed(tmp_path: Path) -> None:
    """The first step (no optimizer state), the steps with momentum, the eval pass: three
    computations at one site, each its own family; none is a variant of another."""
    first = graph(("f32", [4, 32]), *PARAMS)
    with_state = graph(("f32", [4, 32]), *PARAMS, *MOMENTUM, ops={"dot": 1, "multiply": 4})
    evaluation = graph(("f32", [4, 32]), *PARAMS, ops={"dot": 1, "maximum": 1})
    run = compiles_run(tmp_path / "r", [(0, "a", first), (1, "b", with_state),
                                        (10, "c", evaluation)],
                       runs={"a": [0], "b": list(range(1, 10)), "c": [10]})
    fams = explain_recompiles(run)
    assert len(fams) == 3 and {f.verdict for f in fams} == {SINGLE}
    assert all(f.recompiles == [] for f in fams)
    assert findings_of(run) == ([], [])


def test_a_growing_dimension_says_what_grows_not_why(tmp_path: Path) -> None:
    """Growth is evidence that a size follows the step, not of torch.cat in particular."""
    graphs = [(i, f"h{i}", graph(("f32", [i + 1]), ("f32", [512, 8]))) for i in range(5)]
    run = compiles_run(tmp_path / "r", graphs, runs={f"h{i}": [i] for i in range(5)})
    (fam,) = explain_recompiles(run)
    assert fam.varying[0].growing and fam.verdict == CHURN
    (f,), _ = findings_of(run)
    assert "grows at every compilation (1..5)" in f.fix and "follows the step" in f.fix


def test_a_special_scalar_is_named(tmp_path: Path) -> None:
    lr = ("f32", [])
    before = graph(*PARAMS, lr, ops={"multiply": 2})
    after = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:0"])
    (fam,) = explain_recompiles(compiles_run(tmp_path / "r", [(0, "a", before),
                                                               (5, "b", after)]))
    (rec,) = fam.recompiles
    assert rec.cls == VARIANT and "special scalar" in rec.changes[0].text


def test_a_constant_that_becomes_a_scalar_input_is_state_not_a_variant(tmp_path: Path) -> None:
    """An accumulator set to torch.zeros(()) before a phase: the constant 0 in the phase's
    first graph, the previous step's result (a scalar input) in the next, like optimizer state."""
    first = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:0"])
    state = graph(*PARAMS, ("f32", []), ops={"multiply": 2})
    one = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:1"])
    run = compiles_run(tmp_path / "r", [(0, "a", first), (1, "b", state), (2, "c", one)])
    (fam,) = explain_recompiles(run)
    by_step = {r.step: r for r in fam.recompiles}
    assert by_step[1].cls == STRUCTURE
    assert "became a scalar input" in by_step[1].changes[0].text
    assert by_step[2].cls == VARIANT


# --------------------------------------------------------------------------- reuse


def test_graphs_that_run_once_each_churn(tmp_path: Path) -> None:
    graphs = [(i, f"h{n}", graph(("f32", [4, n, 32]), *PARAMS, origin=True))
              for i, n in enumerate([17, 33, 9, 61, 25, 48, 5, 40])]
    run = compiles_run(tmp_path / "r", graphs, runs={k: [s] for s, k, _ in graphs})
    (fam,) = explain_recompiles(run)
    assert fam.verdict == CHURN and fam.counted_count == 7 and fam.run_counts() == (1, 1)
    (v,) = fam.varying
    assert (v.what, v.index) == ("dim", 1) and len(v.values) == 8 and not v.growing
    assert v.input == "the f32[4,?,32] input" and fam.origin == ORIGIN
    (f,), notes = findings_of(run)
    assert (f.kind, f.file, f.line) == ("recompile", "/work/train.py", 17) and not notes
    assert f.compiled_at.line == 30 and f.count == 7 and f.steps == list(range(1, 8))
    assert isinstance(f.facts, RecompileFacts) and f.facts.runs == [1, 1]
    assert "bucket" in f.fix and "each graph ran once" in f.detail


def test_three_buckets_each_reused_are_warm_up_said_in_a_reuse_note(tmp_path: Path) -> None:
    """The issue's correctly bucketed loop: 3 graphs by step 3, nothing compiled after."""
    buckets = {32: "b32", 64: "b64", 96: "b96"}
    order = [32, 96, 64, 32, 96, 96, 64, 32, 32, 64, 96, 32, 64, 96, 32, 64, 32, 96, 64, 32]
    graphs, runs, seen = [], {}, set()
    for step, n in enumerate(order):
        key = buckets[n]
        if key not in seen:
            seen.add(key)
            graphs.append((step, key, graph(("s64", [4, n]), *PARAMS, origin=False)))
        runs.setdefault(key, []).append(step)
    run = compiles_run(tmp_path / "r", graphs, runs=runs)
    (fam,) = explain_recompiles(run)
    assert fam.verdict == REUSED and fam.counted_count == 0
    findings, (note,) = findings_of(run)
    assert findings == [] and note.kind == "reuse" and isinstance(note.facts, ReuseFacts)
    assert note.facts.graphs == 3 and note.facts.runs == [6, 8]
    assert "{32, 64, 96}" in note.detail and "reused" in note.detail


def test_one_graph_that_ran_once_is_not_churn(tmp_path: Path) -> None:
    """One throw-away graph among reused ones (a smaller batch) is not a pattern: no finding,
    a one-off note that says what a smaller last batch needs."""
    assert CHURN_ONE_SHOTS == 2
    full, part = graph(("f32", [4, 32]), *PARAMS), graph(("f32", [2, 32]), *PARAMS)
    run = compiles_run(tmp_path / "r", [(0, "full", full), (1, "part", part)],
                       runs={"full": [0, 2, 3, 4], "part": [1]})
    (fam,) = explain_recompiles(run)
    assert fam.verdict == LATE and not fam.outlook.keeps_compiling
    findings, (note,) = findings_of(run)
    assert findings == [] and "drop_last=True" in note.fix


def test_a_last_partial_batch_every_epoch_is_a_note_not_bucketing(tmp_path: Path) -> None:
    """Three epochs of 4, 4, 4, 2 rows: the 2-row graph runs once an epoch, reused, yet it is
    not a bucket that works: a note with drop_last, never 'nothing to change'."""
    full, part = graph(("f32", [4, 32]), *PARAMS), graph(("f32", [2, 32]), *PARAMS)
    run = compiles_run(tmp_path / "r", [(0, "full", full), (3, "part", part)],
                       runs={"full": [0, 1, 2, 4, 5, 6, 8, 9, 10], "part": [3, 7, 11]})
    (fam,) = explain_recompiles(run)
    assert fam.verdict == LATE
    findings, (note,) = findings_of(run)
    assert findings == [] and note.kind == "recompile" and "drop_last=True" in note.fix
    assert "nothing to change" not in note.fix


def test_new_graphs_that_keep_coming_churn_however_often_some_were_reused(tmp_path: Path) -> None:
    """Pad-to-longest over 120 steps (the longest of 4 lengths in 1..96): some lengths repeat
    and their graphs ran 4-6 times, yet the run's second half still meets new lengths: the
    family keeps compiling (novelty), with the graphs still expected over the horizon."""
    rng = random.Random(3)
    lengths = [max(rng.randint(1, 96) for _ in range(4)) for _ in range(120)]
    graphs, runs = [], {}
    for step, n in enumerate(lengths):
        key = f"L{n}"
        if key not in runs:
            graphs.append((step, key, graph(("f32", [4, n]), *PARAMS)))
        runs.setdefault(key, []).append(step)
    run = compiles_run(tmp_path / "r", graphs, runs=runs)
    (fam,) = explain_recompiles(run)
    assert max(len(v) for v in runs.values()) >= 4 and fam.run_counts()[1] >= 4
    assert sum(1 for s, _, _ in graphs if s >= 60) >= 3  # new graphs in the second half
    assert fam.verdict == CHURN and fam.outlook is not None
    assert fam.outlook.expected_new >= 3 and fam.outlook.keeps_compiling
    (f,), _ = findings_of(run)
    assert "more graph" in f.detail and "next 1,000 steps" in f.detail
    # the same graphs, every one made in the first steps and reused 5 times after: a bounded set
    first = sorted(runs, key=lambda k: runs[k][0])
    graphs = [(i, k, graph(("f32", [4, int(k[1:])]), *PARAMS)) for i, k in enumerate(first)]
    runs = {k: [i + j * len(first) for j in range(5)] for i, k in enumerate(first)}
    (fam,) = explain_recompiles(compiles_run(tmp_path / "r5", graphs, runs=runs))
    assert fam.verdict == REUSED and not fam.outlook.keeps_compiling


def test_a_variant_compiled_after_the_quiet_steps_is_a_late_note(tmp_path: Path) -> None:
    """A learning rate that reaches the special scalar 0.0 in the run's last steps: one graph
    compiled after warm-up (QUIET_STEPS compile-free steps), then reused: a note."""
    lr = ("f32", [])
    before = graph(*PARAMS, lr, ops={"multiply": 2})
    zero = graph(*PARAMS, ops={"multiply": 2}, constants=["f32:0"])
    run = compiles_run(tmp_path / "r", [(0, "a", before), (5, "z", zero)],
                       runs={"a": [0, 1, 2, 3, 4], "z": [5, 6, 7]})
    (fam,) = explain_recompiles(run)
    assert fam.verdict == LATE and fam.counted_count == 1
    findings, (note,) = findings_of(run)
    assert findings == [] and note.kind == "recompile" and "step 5" in note.detail


def test_a_bucket_first_met_after_warm_up_is_said_to_be_one(tmp_path: Path) -> None:
    """Bucketing that works, whose largest bucket first comes at step 8: a note whose fix is to
    compile every bucket before the loop (not to pad to buckets: the program does)."""
    sizes = {"b16": 16, "b32": 32, "b48": 48, "b128": 128}
    graphs = [(s, k, graph(("s64", [8, sizes[k]]), *PARAMS))
              for s, k in [(0, "b16"), (1, "b32"), (2, "b48"), (8, "b128")]]
    runs = {"b16": [0, 3, 6, 9], "b32": [1, 4, 7], "b48": [2, 5, 10], "b128": [8]}
    run = compiles_run(tmp_path / "r", graphs, runs=runs)
    (fam,) = explain_recompiles(run)
    assert fam.verdict == LATE
    findings, (note,) = findings_of(run)
    assert findings == [] and "step 8" in note.detail
    assert "compile every bucket before the loop" in note.fix and "3 graphs" in note.fix
    # the same late size where only one earlier graph was reused: a size to pad, as before
    runs = {"b16": [0, 3, 6, 9], "b32": [1, 4], "b48": [2, 5], "b128": [8]}
    findings, (note,) = findings_of(compiles_run(tmp_path / "r2", graphs, runs=runs))
    assert findings == [] and "step 8" in note.detail
    assert "compile every bucket" not in note.fix and "bucket sizes" in note.fix


def test_without_executions_two_variants_churn(tmp_path: Path) -> None:
    """Runs that recorded no executions per graph (older lazyscopes, workers other than local
    rank 0, eager mode): two or more variants of the first graph churn."""
    graphs = [(i, f"h{n}", graph(("f32", [4, n]), *PARAMS)) for i, n in enumerate([3, 5, 7])]
    (fam,) = explain_recompiles(compiles_run(tmp_path / "r", graphs))
    assert fam.uses[0].executions is None and fam.verdict == CHURN and fam.counted_count == 2


def test_a_graph_compiled_again_is_an_eviction_and_counts(tmp_path: Path) -> None:
    a, b = graph(("f32", [4, 8])), graph(("f32", [4, 9]))
    run = compiles_run(tmp_path / "r", [(0, "A", a), (1, "B", b), (2, "A", a), (3, "B", b),
                                        (4, "A", a)])
    (fam,) = explain_recompiles(run)
    assert fam.classes == {FIRST: 1, VARIANT: 1, EVICTED: 3}
    assert fam.verdict == CHURN and fam.counted_count == 4
    assert list(fam.counted_steps) == [1, 2, 3, 4]


def test_a_fixed_warmup_counts_every_compilation_after_it(tmp_path: Path) -> None:
    a, b, c = (graph(("f32", [4, n]), *PARAMS) for n in (8, 9, 10))
    run = compiles_run(tmp_path / "r", [(0, "a", a), (1, "b", b), (3, "c", c)],
                       runs={"a": [0, 2], "b": [1, 4], "c": [3, 5]}, warmup_steps=1)
    (fam,) = explain_recompiles(run)
    assert fam.counted_count == 2 and [r.step for r in fam.counted] == [1, 3]
    (f,), _ = findings_of(run)
    assert f.count == 2


def test_backend_reported_changes_and_backward_compiles(tmp_path: Path) -> None:
    """torch.compile: the guards say what changed; a backward compile joins its forward's
    family (its time is shown apart, it is not a recompile of its own)."""
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
    (fam,) = explain_recompiles(run)
    assert fam.phase == "forward" and fam.backward_seconds == 1.0
    assert fam.counted_count == 2 and fam.varying[0].input == "x"
    (f,), _ = make_findings("compile", sites=[fam], syncs=[], fallbacks=[], breaks=[],
                            eagers=[], steps=3)
    assert (f.file, f.line) == ("/work/train.py", 40)
    assert f.compiled_at.file == "/work/model.py" and f.compiled_at.line == 17
    assert "mark_dynamic" in f.fix and "xla" not in f.fix.lower()


def test_library_graphs_are_not_the_programs(tmp_path: Path) -> None:
    mine = graph(("f32", [4, 8]))
    theirs = Compile(cause_kind="internal", owner="library", inputs=[GraphInput("s64", [1])])
    theirs2 = Compile(cause_kind="internal", owner="library", inputs=[GraphInput("f32", [1])])
    run = compiles_run(tmp_path / "r", [(0, "a", mine), (3, "x", theirs), (4, "y", theirs2)])
    (fam,) = explain_recompiles(run)
    assert fam.compiles == 1 and fam.counted_count == 0


def test_a_length_that_cycles_back_is_not_called_growing(tmp_path: Path) -> None:
    lengths = [3, 4, 5, 6, 7]
    graphs = [(i, f"h{n}", graph(("f32", [8, n]), *PARAMS)) for i, n in enumerate(lengths)]
    grow = compiles_run(tmp_path / "grow", graphs)
    findings, _ = findings_of(grow)
    assert "grows at every compilation" in findings[0].fix
    # the same lengths again: the cache dropped them and they were compiled again
    again = [(len(graphs) + i, key, g) for i, (_, key, g) in enumerate(graphs)]
    cycle = compiles_run(tmp_path / "cycle", graphs + again)
    (fam,) = explain_recompiles(cycle)
    assert fam.classes[EVICTED] == len(lengths)
    findings, _ = findings_of(cycle)
    assert "grows" not in findings[0].fix and "dim 1" in findings[0].fix


def test_a_late_bucket_used_like_the_others_is_bucketing_not_a_note(tmp_path: Path) -> None:
    """A bucket first seen after the quiet steps, then run as often as the others, interleaved:
    one more bucket. A late variant that replaces the earlier graph (a switch) or runs rarely
    (a partial last batch) is a one-off worth a note."""
    a, b = graph(("s64", [4, 96]), *PARAMS), graph(("s64", [4, 32]), *PARAMS)
    interleaved = compiles_run(tmp_path / "i", [(0, "a", a), (5, "b", b)],
                               runs={"a": [0, 1, 2, 3, 4, 6, 8, 10], "b": [5, 7, 9, 11]})
    (fam,) = explain_recompiles(interleaved)
    assert fam.verdict == REUSED
    switch = compiles_run(tmp_path / "s", [(0, "a", a), (5, "b", b)],
                          runs={"a": [0, 1, 2, 3, 4], "b": [5, 6, 7, 8]})
    assert explain_recompiles(switch)[0].verdict == LATE
    rare = compiles_run(tmp_path / "r", [(0, "a", a), (5, "b", b)],
                        runs={"a": [0, 1, 2, 3, 4, 6, 7, 8, 10, 11], "b": [5, 9]})
    assert explain_recompiles(rare)[0].verdict == LATE


def test_a_short_run_over_declared_buckets_is_bucketing_not_churn(tmp_path: Path) -> None:
    """16 steps padded by PadToBuckets to 8 declared lengths meet 6 of them, most once: the
    program bounded its graphs (meta.json info declared_buckets), so this is warm-up, not
    churn. The same graphs without the declaration churn; a length outside it churns too."""
    buckets = [4, 7, 14, 19, 21, 28, 36, 48]
    order = [19, 36, 14, 7, 19, 36, 36, 19, 48, 14, 19, 36, 21, 19, 36, 14]
    graphs, runs, seen = [], {}, set()
    for step, n in enumerate(order):
        key = f"b{n}"
        if key not in seen:
            seen.add(key)
            graphs.append((step, key, graph(("s64", [4, n]), *PARAMS)))
        runs.setdefault(key, []).append(step)
    declared = compiles_run(tmp_path / "d", graphs, runs=runs,
                            info={"declared_buckets": buckets})
    (fam,) = explain_recompiles(declared)
    assert fam.verdict == REUSED and fam.declared == buckets and fam.counted_count == 0
    findings, (note,) = findings_of(declared)
    assert findings == [] and note.kind == "reuse"
    assert "one per bucket met of the 8 the program pads to (4, 7, 14, 19" in note.detail
    # undeclared, the same 6 graphs in 16 steps (3 run once) are priced: ~3 more expected
    # over the next 1,000 steps at 1 s each, 3% of those steps' time: late notes, no finding
    (plain,) = explain_recompiles(compiles_run(tmp_path / "p", graphs, runs=runs))
    assert plain.verdict == LATE and plain.outlook is not None
    assert plain.outlook.expected_new < 4 and not plain.outlook.keeps_compiling
    (outside,) = explain_recompiles(compiles_run(tmp_path / "o", graphs, runs=runs,
                                                 info={"declared_buckets": buckets[:-1]}))
    assert outside.declared == [] and outside.verdict == plain.verdict


def test_a_note_counts_what_its_sentence_says(tmp_path: Path) -> None:
    """Two late one-offs in one family: the note's count (x2) and its sentence agree, and the
    same new length cut in two graphs (a read in the step) is one note, counted once."""
    sizes = {"b16": 16, "b32": 32, "b48": 48, "b64": 64}
    graphs = [(s, k, graph(("s64", [8, sizes[k]]), *PARAMS))
              for s, k in [(0, "b16"), (1, "b32"), (6, "b48"), (9, "b64")]]
    runs = {"b16": [0, 2, 4, 7, 10], "b32": [1, 3, 5, 8, 11], "b48": [6], "b64": [9]}
    run = compiles_run(tmp_path / "r", graphs, runs=runs)
    (fam,) = explain_recompiles(run)
    assert fam.verdict == LATE and fam.counted_count == 2
    findings, (note,) = findings_of(run)
    assert findings == [] and note.count == 2
    assert "recompiled 2 times after warm-up, at steps 6, 9" in note.detail


def test_a_batch_dimension_dynamo_made_dynamic_is_not_a_partial_batch(tmp_path: Path) -> None:
    """torch.compile: every batch has its own size; dynamo recompiled once and made dim 0
    dynamic. The note says so; it never tells to drop a last partial batch."""
    call = (frame("/work/train.py", 40, "main"),)
    fn = "forward (/work/model.py:17)"
    events = [
        {"kind": "compile", "step": 0, "seconds": 2.0, "stack": call, "key": "0/0",
         "payload": Compile(phase="forward", cause_kind="first", function=fn)},
        {"kind": "compile", "step": 1, "seconds": 2.0, "stack": call, "key": "0/1",
         "payload": Compile(phase="forward", cause_kind="recompile", function=fn,
                            changes=[Change("x", "dim", 0, 32, 27)], dynamic=["x dim 0"])},
    ]
    events += [{"kind": "execute", "step": s, "key": "0/1", "value": 1} for s in range(1, 8)]
    events.append({"kind": "execute", "step": 0, "key": "0/0", "value": 1})
    run = build_run(tmp_path / "r", backend="compile", events=events,
                    steps=[{"wall_s": 0.1, "compile_count": c} for c in [1, 1] + [0] * 6])
    (fam,) = explain_recompiles(run)
    assert fam.dynamic == ["x dim 0"] and fam.verdict == LATE
    findings, (note,) = make_findings("compile", sites=[fam], syncs=[], fallbacks=[],
                                      breaks=[], eagers=[], steps=8)
    assert findings == [] and "drop_last" not in note.fix and "dynamic" in note.fix


def test_varying_values_are_each_kept_once_hashable_or_not() -> None:
    """The values a varying input took, each once in sorted order: ints through the set that
    keeps _varying linear, a list (a guarded value that is a list) through the list's own
    test."""
    from lazyscope.analyze.recompiles import Recompile, _varying
    from lazyscope.model import Change

    def rec(step: int, *changes: Change) -> Recompile:
        return Recompile(step, 0.1, f"g{step}", f"g{step - 1}", "shape", list(changes))

    lengths = [rec(i, Change("x", "dim", 1, before=i, after=i + 1)) for i in range(1, 600)]
    lengths.append(rec(600, Change("x", "dim", 1, before=5, after=3)))
    guards = [rec(700, Change("cfg", "value", None, before=[1, 2], after=[3])),
              rec(701, Change("cfg", "value", None, before=[3], after=[1, 2]))]
    dim, value = _varying(lengths + guards)
    assert dim.values == list(range(1, 601)) and not dim.growing
    assert _varying(lengths[:-1])[0].growing
    assert sorted(value.values, key=str) == [[1, 2], [3]]
