"""Issue 46's rules on runs built in memory and on source snippets (pure logic): novelty by site,
graphs met in the backend's cache, a smaller last batch only when it is one, growth judged over
the steady steps, a loop without a barrier, sizes told from constants, the producer's line, the
default check rules, a tensor handed to a library that formats it."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

from lazyscope.analyze.barriers import no_barrier_findings
from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.findings import make_findings
from lazyscope.analyze.memory import growing_memory
from lazyscope.analyze.recompiles import CHURN, FIXED, LATE, explain_recompiles
from lazyscope.analyze.report import build_report
from lazyscope.backends.xla.hlo import parse_module, parse_stacks
from lazyscope.model import Compile, GraphInput, GraphMemory
from lazyscope.model.source_files import SOURCES, data_size_maker, loop_without_barrier
from tests.builders import build_run, frame
from tests.unit.test_recompiles import BARRIER, compiles_run

ROW = ("f32", [8, 32])
PARAMS = [("f32", [32, 32]), ("f32", [32])]


def stacked(k: int, line: int = 21) -> Compile:
    """The graph of step k of ``history.append(out); torch.stack(history)``: k + 1 inputs of one
    shape (one more each step), the stack line's instructions differ."""
    inputs = [GraphInput(d, s) for d, s in [*PARAMS, *[ROW] * (k + 1)]]
    return Compile(cause_kind="barrier", inputs=inputs, ops={"dot": 1, "concatenate": 1},
                   digest=f"g{k}", lines=[["/work/train.py", line, f"{k:010d}:{k:06d}"],
                                          ["/work/train.py", 18, "0000000000:000000"]])


def test_more_inputs_every_step_is_one_churning_site_not_families_of_one(tmp_path: Path) -> None:
    graphs = [(k, f"g{k}", stacked(k)) for k in range(25)]
    run = compiles_run(tmp_path / "r", graphs, runs={f"g{k}": [k] for k in range(25)})
    (fam,) = explain_recompiles(run)
    assert fam.verdict == CHURN and fam.site_wide and fam.graphs == 25
    [v] = fam.varying
    assert v.what == "count" and v.growing and v.input == "the f32[8,32] input"
    findings, _ = make_findings("xla", sites=[fam], syncs=[], fallbacks=[], breaks=[],
                                eagers=[], steps=25)
    [f] = findings
    assert (f.file, f.line, f.count) == ("/work/train.py", 21, 24)
    assert "once more at every step" in f.fix and "stack the list once" in f.fix


def test_under_a_fixed_warmup_every_graph_new_to_the_site_counts(tmp_path: Path) -> None:
    graphs = [(k, f"g{k}", stacked(k)) for k in range(6)]
    run = compiles_run(tmp_path / "r", graphs, runs={f"g{k}": [k] for k in range(6)},
                       warmup_steps=2)
    (fam,) = explain_recompiles(run)
    assert fam.verdict == FIXED and fam.counted_count == 4  # steps 2..5


def test_a_bounded_set_of_families_at_one_site_stays_apart(tmp_path: Path) -> None:
    """Train and eval graphs at one site, each reused: not one churning family."""
    train = Compile(cause_kind="barrier", inputs=[GraphInput(d, s) for d, s in PARAMS],
                    ops={"dot": 2, "subtract": 1}, digest="train")
    evaluate = Compile(cause_kind="barrier", inputs=[GraphInput("f32", [32, 32])],
                       ops={"dot": 1}, digest="eval")
    run = compiles_run(tmp_path / "r", [(0, "t", train), (3, "e", evaluate)],
                       runs={"t": list(range(20)), "e": list(range(3, 20, 3))})
    assert {f.verdict for f in explain_recompiles(run)} <= {"single", "reused"}


def test_a_graph_met_in_the_cache_after_warmup_counts_as_new(tmp_path: Path) -> None:
    """``cached`` events: the graph ran without this trace compiling it (torch_xla's in-process
    cache held it from an earlier test). Under the guard's fixed warm-up it is a recompilation,
    as it would be had the test run alone."""
    short = Compile(cause_kind="barrier", inputs=[GraphInput("f32", [16, 8])], ops={"dot": 1},
                    digest="16")
    long = Compile(cause_kind="barrier", inputs=[GraphInput("f32", [24, 8])], ops={"dot": 1},
                   digest="24")
    events = [{"kind": "compile", "step": 0, "stack": BARRIER, "payload": short, "key": "s"},
              {"kind": "cached", "step": 4, "stack": BARRIER, "payload": long, "key": "l"}]
    events += [{"kind": "execute", "step": s, "key": "s" if s < 4 else "l", "value": 1}
               for s in range(8)]
    run = build_run(tmp_path / "r", events=events, warmup_steps=2,
                    steps=[{"wall_s": 0.1, "compile_count": 1 if s == 0 else 0}
                           for s in range(8)])
    report = build_report(run)
    assert report.summary.compiles == 1  # torch_xla compiled one graph: counts stay its own
    assert not check_report(report, Rules(max_recompiles=0)).passed
    [note] = report.notes
    assert note.line == 30 and "16 -> 24" in note.detail and "drop" not in note.fix


def _batches(tmp: Path, sizes: list[int]):
    graphs, runs, seen = [], {}, {}
    for step, n in enumerate(sizes):
        key = f"b{n}"
        if key not in seen:
            seen[key] = step
            graphs.append((step, key, Compile(cause_kind="barrier", inputs=[
                GraphInput("f32", [n, 16], origin=frame("/work/train.py", 17, ""))],
                ops={"dot": 1}, digest=key)))
        runs.setdefault(key, []).append(step)
    return compiles_run(tmp, graphs, runs=runs)


def test_drop_the_last_batch_only_for_a_smaller_batch_at_an_epoch_s_end(tmp_path: Path) -> None:
    epochs = ([8] * 9 + [5]) * 3
    (fam,) = explain_recompiles(_batches(tmp_path / "epochs", epochs))
    assert fam.last_batch and fam.verdict == LATE
    _, [note] = make_findings("xla", sites=[fam], syncs=[], fallbacks=[], breaks=[],
                              eagers=[], steps=len(epochs))
    assert "drop_last=True" in note.fix
    for name, sizes in [("grew", [5] * 4 + [6] * 36), ("switched", [12] * 10 + [8] * 30)]:
        (fam,) = explain_recompiles(_batches(tmp_path / name, sizes))
        assert not fam.last_batch, name
        _, notes = make_findings("xla", sites=[fam], syncs=[], fallbacks=[], breaks=[],
                                 eagers=[], steps=len(sizes))
        assert notes and "drop" not in notes[0].fix and "kept its new value" in notes[0].fix


def test_six_late_recompilations_are_a_finding_not_a_one_off(tmp_path: Path) -> None:
    sizes = [4] * 3 + [n for n in range(5, 11) for _ in range(3)] + [10] * 22
    (fam,) = explain_recompiles(_batches(tmp_path / "r", sizes))
    assert fam.verdict == CHURN and fam.counted_count == 6


def _grown(tmp: Path, held: list[tuple[int, int]], steps: int):
    events = [{"kind": "compile", "step": s, "stack": BARRIER, "key": f"g{i}",
               "payload": Compile(cause_kind="barrier", memory=GraphMemory(inputs=b))}
              for i, (s, b) in enumerate(held)]
    return build_run(tmp, events=events, steps=[{"wall_s": 0.1}] * steps)


def test_growth_is_judged_over_the_steady_steps(tmp_path: Path) -> None:
    """Four rising graphs all made by step 7 of 32 (gradient accumulation, buckets met
    shortest first) are warm-up; graphs that keep rising in the second half are growth."""
    early = _grown(tmp_path / "early", [(0, 1 << 17), (1, 1 << 18), (3, 3 << 17), (7, 1 << 19)],
                   32)
    assert growing_memory("xla", early, {}) == []
    late = _grown(tmp_path / "late", [(s, (s + 1) << 12) for s in range(12)], 12)
    [f] = growing_memory("xla", late, {})
    assert f.kind == "growing_memory" and f.count == 11


def test_default_check_fails_on_every_memory_finding_and_a_loop_without_barrier(
        tmp_path: Path) -> None:
    late = _grown(tmp_path / "late", [(s, (s + 1) << 12) for s in range(12)], 12)
    clean = build_report(_grown(tmp_path / "clean", [(0, 1 << 12)], 4))
    assert check_report(clean, Rules(allow_incomplete=True)).passed
    report = replace(clean, findings=growing_memory("xla", late, {}))
    result = check_report(report, Rules(allow_incomplete=True))
    assert [v.rule for v in result.violations] == ["no-memory-findings"]
    assert [r for r, _ in result.rules] == ["max-recompiles", "no-barrier-loops",
                                            "no-memory-findings"]


LOOP = """\
import torch, torch_xla
dev = torch_xla.device()
total = torch.zeros((), device=dev)
for step in range(12):
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    total += loss.detach()
print(total.item())
"""


def _source(tmp: Path, text: str, name: str = "train") -> str:
    path = tmp / f"{name}.py"  # a new name for new text: the parse of a file is cached
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_loop_that_ends_no_step_is_found_in_the_source(tmp_path: Path) -> None:
    file = _source(tmp_path, LOOP)
    assert loop_without_barrier(file, [6, 9], 10).line == 4
    # opt.step() is no barrier; the read inside the loop, or a barrier in it, is no finding
    assert loop_without_barrier(file, [6], 6) is None
    for barrier in ("torch_xla.sync()", "xm.mark_step()", "torch_xla.step()", "helper()"):
        body = LOOP.replace("    total += loss.detach()",
                            f"    total += loss.detach()\n    {barrier}")
        if barrier == "helper()":
            body = "def helper():\n    torch_xla.sync()\n" + body
        file = _source(tmp_path, body, barrier.split("(")[0].replace(".", "_"))
        assert loop_without_barrier(file, [7], 12) is None, barrier
    loader = LOOP.replace("for step in range(12):", "for step in pl.MpDeviceLoader(data, dev):")
    assert loop_without_barrier(_source(tmp_path, loader, "loader"), [6], 10) is None


def test_a_run_with_no_barrier_gets_a_finding_at_the_loop(tmp_path: Path) -> None:
    file = _source(tmp_path, LOOP)
    read = (frame("/site-packages/torch/_tensor.py", 1, "item", library=True), frame(file, 10))
    graph = Compile(cause_kind="value_read", num_inputs=16, ops={"dot": 300, "add": 500},
                    inputs=[GraphInput("f32", [8, 32], origin=frame(file, 5, ""))
                            for _ in range(12)], lines=[[file, 6, "a:b"], [file, 9, "c:d"]],
                    memory=GraphMemory(inputs=1 << 16))
    run = build_run(tmp_path / "r", events=[{"kind": "compile", "step": 0, "seconds": 2.5,
                                             "stack": read, "payload": graph, "key": "g"}])
    [f] = no_barrier_findings("xla", run, SOURCES)
    assert (f.file, f.line, f.facts.ops, f.facts.loop_inputs) == (file, 4, 800, 12)
    assert "torch_xla.sync()" in f.fix and f.seconds == 2.5
    report = build_report(run, sources=SOURCES)
    assert report.verdict.startswith("no step barrier in the loop at")
    assert not check_report(report, Rules()).passed


def test_a_size_from_the_data_is_told_by_the_source(tmp_path: Path) -> None:
    file = _source(tmp_path, """\
        keep = torch.nonzero(labels).squeeze(1)
        picked = feats[labels > 0]
        mask = scores > 0.5
        kept = scores[mask]
        rows = feats[idx]
        """)
    assert [data_size_maker(file, n) for n in range(1, 6)] == [
        "nonzero", "mask indexing", "", "mask indexing", ""]


def test_an_optimizer_step_s_constant_is_set_where_the_lr_is_made(tmp_path: Path) -> None:
    file = _source(tmp_path, """\
        for step in range(10):
            lr = 0.1 * max(0.0, 1.0 - step / 6)
            for group in opt.param_groups:
                group["lr"] = lr
            loss.backward()
            opt.step()
        """)
    assert SOURCES.value_origin(file, 6).line == 2


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def test_instructions_a_library_made_count_at_the_user_s_calling_line() -> None:
    """The proto's stack frame index (what --xla_dump_hlo_as_proto writes) gives an
    instruction's whole stack: one made in F.interpolate counts at the user's line."""
    lib, user = "/site-packages/torch/nn/functional.py", "/work/model.py"
    index = (_field(1, lib.encode()) + _field(1, user.encode())
             + _field(2, b"interpolate") + _field(2, b"forward")
             + _field(3, _field(1, 1) + _field(2, 1) + _field(3, 4726))
             + _field(3, _field(1, 2) + _field(2, 2) + _field(3, 19))
             + _field(4, _field(1, 2)) + _field(4, _field(1, 1) + _field(2, 1)))
    instr = _field(1, b"multiply.3") + _field(7, _field(15, 2))
    module = _field(3, _field(2, instr)) + _field(17, index)
    stacks = parse_stacks(_field(1, module))  # a dumped HloProto wraps the module
    assert stacks == {"multiply.3": [(lib, 4726, "interpolate"), (user, 19, "forward")]}
    meta = f'metadata={{op_type="aten__mul" source_file="{lib}" source_line=4726}}'
    text = ("HloModule m, entry_computation_layout={(f32[4]{0})->f32[8]{0}}\n\nENTRY %m "
            "(p0: f32[4]) -> f32[8] {\n"
            f"  %p0 = f32[4]{{0}} parameter(0)\n"
            f"  ROOT %multiply.3 = f32[8]{{0}} multiply(%p0, %p0), {meta}\n}}\n")
    assert parse_module(text).lines == []
    [(file, line, _)] = parse_module(text, stacks=stacks).lines
    assert (file, line) == (user, 19)


def test_a_line_s_digest_tells_a_size_from_a_constant() -> None:
    def module(shape: int, value: float) -> str:
        meta = 'metadata={source_file="/work/t.py" source_line=5}'
        return ("HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\nENTRY %m "
                "(p0: f32[4]) -> f32[4] {\n"
                "  %p0 = f32[4]{0} parameter(0)\n"
                f"  %c = f32[] constant({value}), {meta}\n"
                f"  ROOT %i = f32[{shape}]{{0}} iota(), iota_dimension=0, {meta}\n}}\n")
    digest = {(n, v): parse_module(module(n, v)).lines[0][2] for n in (4, 6) for v in (1.5, 2.5)}
    full, shape = {k: d.split(":")[0] for k, d in digest.items()}, \
        {k: d.split(":")[1] for k, d in digest.items()}
    assert full[(4, 1.5)] != full[(4, 2.5)] and shape[(4, 1.5)] == shape[(4, 2.5)]
    assert shape[(4, 1.5)] != shape[(6, 1.5)]


def test_the_batch_moved_in_the_loop_is_the_input_s_origin(tmp_path: Path) -> None:
    file = _source(tmp_path, """\
        emb = torch.nn.Embedding(64, 32).to(dev)
        for lengths in LENGTHS:
            tokens = pad_sequence(docs, batch_first=True).to(dev)
            logits = emb(tokens)
        """, "moved")
    assert SOURCES.transfer_origin(file, 4).line == 3


def test_a_decorated_function_s_lines_start_at_its_decorator(tmp_path: Path) -> None:
    file = _source(tmp_path, """\
        @torch.compile(backend="openxla")
        def score(tokens):
            return head(emb(tokens)).mean()
        total = score(tokens)
        """, "decorated")
    assert [SOURCES.function_of(file, n) for n in (1, 2, 3, 4)] == [
        "score", "score", "score", "<module>"]


def test_families_of_several_graphs_are_not_joined_by_site(tmp_path: Path) -> None:
    """Train and eval buckets at one site (a Trainer's trainer.train() line): families of their
    own, each a bounded set reused; novelty by site joins families of one graph only."""
    graphs, runs, step = [], {}, 0
    for length in (64, 112, 128):
        for role, inputs in (("train", [*PARAMS, ("s64", [8, length])]),
                             ("eval", [("s64", [8, length])])):
            key = f"{role}{length}"
            graphs.append((step, key, Compile(cause_kind="barrier", inputs=[
                GraphInput(d, s) for d, s in inputs],
                ops={"dot": 1, **({"subtract": 1} if role == "train" else {})}, digest=key)))
            runs[key] = [step, step + 6, step + 12]
            step += 1
    run = compiles_run(tmp_path / "r", graphs, runs=runs, steps=24)
    families = explain_recompiles(run)
    assert len(families) == 2 and not any(f.site_wide for f in families)
    assert all(f.verdict != CHURN for f in families)
