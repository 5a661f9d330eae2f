"""Sync, fallback, graph-break and eager-fallback findings, ranking and notes (pure logic on
runs built with the writer)."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.report import build_report
from lazyscope.model import EagerFallback, Fallback, FallbackExec, GraphBreak, Sync
from lazyscope.render.text import render_text
from tests.builders import build_run, frame

LOOP = frame("/work/train.py", 30, "main")
HELPER = frame("/work/train.py", 12, "log_loss")
LIB_MESH = frame("/site-packages/torch_xla/core/xla_model.py", 1442, "mesh_reduce", True)


def steps(n: int, **values) -> list[dict]:
    return [{"wall_s": 0.1, "compile_count": 0, "from_device_count": 1, **values}] * n


def sync(step: int, stack, read: str = ".item()", closure: str = "", owner: str = "user",
         seconds: float = 0.05) -> dict:
    return {"kind": "sync", "step": step, "seconds": seconds, "stack": stack,
            "payload": Sync(read=read, closure=closure, owner=owner), "value": 1}


def test_a_read_every_step_is_a_finding_at_its_line_with_the_callers(tmp_path: Path) -> None:
    events = [sync(i, (HELPER, LOOP)) for i in range(6)] + [sync(5, (LOOP,), read="print")]
    report = build_report(build_run(tmp_path / "r", steps=steps(6), events=events))
    (f,) = report.findings
    assert (f.kind, f.file, f.line, f.function) == ("sync", "/work/train.py", 12, "log_loss")
    assert [fr.line for fr in f.stack] == [12, 30]  # the helper, then the loop that called it
    assert f.count == 6 and f.steps == list(range(6)) and abs(f.seconds - 0.3) < 1e-9
    assert "6 executions" in f.detail and "add_step_closure" in f.fix
    text = render_text(report)
    assert "called from /work/train.py:30" in text


def test_closure_reads_are_after_the_barrier_and_async_ones_cost_nothing(
        tmp_path: Path) -> None:
    events = ([sync(i, (HELPER,), closure="sync") for i in range(6)]
              + [sync(i, (LOOP,), closure="async") for i in range(6)])
    report = build_report(build_run(tmp_path / "r", steps=steps(6), events=events))
    assert report.findings == []
    (note,) = report.notes  # the blocking closure read in every step is worth a note
    assert note.line == 12 and "after the barrier" in note.detail
    assert "run_async=True" in note.fix and "forcing" not in note.detail


def test_a_library_api_called_every_step_is_a_finding_at_the_users_call(tmp_path: Path) -> None:
    """xm.mesh_reduce in the loop copies the loss to the host every step: the user's cost, at
    the user's call, naming the API; the same API read once (an epoch's end) is only listed."""
    every = [sync(i, (LIB_MESH, LOOP), owner="library") for i in range(6)]
    report = build_report(build_run(tmp_path / "r", steps=steps(6), events=every))
    (f,) = report.findings
    assert (f.kind, f.file, f.line) == ("sync", "/work/train.py", 30)
    assert f.facts.api == "mesh_reduce" and "mesh_reduce" in f.fix and f.count == 6
    once = [sync(5, (LIB_MESH, LOOP), owner="library")]
    report = build_report(build_run(tmp_path / "once", steps=steps(6), events=once))
    assert report.findings == []
    assert any("mesh_reduce" in n and "not findings" in n for n in report.run_notes)


def test_a_closure_read_every_tenth_step_is_not_even_a_note(tmp_path: Path) -> None:
    events = [sync(i, (HELPER,), closure="sync") for i in range(0, 20, 10)]
    report = build_report(build_run(tmp_path / "r", steps=steps(20), events=events))
    assert report.findings == [] and report.notes == []


def test_fallbacks_counted_exactly_and_sited_whatever_the_call(tmp_path: Path) -> None:
    events = [{"kind": "fallback_exec", "step": i, "payload": FallbackExec("aten::_fft_r2c"),
               "value": 1} for i in range(6)]
    events += [{"kind": "fallback", "step": 0, "seconds": 0.03, "stack": (LOOP,),
                "payload": Fallback(op="aten::_fft_r2c", via="stft"), "value": 1},
               {"kind": "fallback", "step": 1, "seconds": 0.02, "stack": (LOOP,),
                "payload": Fallback(op="aten::_fft_r2c", via="stft"), "value": 1}]
    report = build_report(build_run(tmp_path / "r", steps=steps(6), events=events))
    (f,) = report.findings
    assert (f.kind, f.line, f.count) == ("fallback", 30, 6) and f.facts.op == "aten::_fft_r2c"
    assert abs(f.seconds - 0.12) < 1e-9  # the fastest sampled call x 6 executions
    assert "called through stft" in f.detail and "DFT matrix" in f.fix
    assert report.summary.fallback_ops == {"aten::_fft_r2c": 6}


def test_graph_breaks_and_eager_fallbacks_are_findings_without_steps(tmp_path: Path) -> None:
    """A torch.compile script without lazyscope.barrier(): no steps, findings all the same."""
    events = [
        {"kind": "graph_break", "step": 0, "stack": (LOOP,), "payload": GraphBreak(
            reason="Tensor.item() call with capture_scalar_outputs=False",
            hints=["Set torch._dynamo.config.capture_scalar_outputs = True"])},
        {"kind": "eager_fallback", "step": 0, "stack": (LOOP,), "payload": EagerFallback(
            function="forward (/work/model.py:5)", limit=8,
            last_reason="tensor 'x' size mismatch at index 1. expected 9, actual 10")},
    ]
    report = build_report(build_run(tmp_path / "r", backend="compile", events=events))
    kinds = sorted(f.kind for f in report.findings)
    assert kinds == ["eager_fallback", "graph_break"]
    brk = next(f for f in report.findings if f.kind == "graph_break")
    assert "capture_scalar_outputs" in brk.detail and brk.facts.hints
    eager = next(f for f in report.findings if f.kind == "eager_fallback")
    assert "runs eagerly" in eager.detail and "limit" in eager.detail and eager.line == 30
    assert "no step barrier" in report.verdict or "graph break" in report.verdict


def test_findings_are_ranked_by_seconds(tmp_path: Path) -> None:
    events = [sync(i, (LOOP,), seconds=0.5) for i in range(3)]
    events += [sync(i, (HELPER,), seconds=0.01) for i in range(3)]
    report = build_report(build_run(tmp_path / "r", steps=steps(3), events=events))
    assert [f.line for f in report.findings] == [30, 12]
    text = render_text(report)
    assert "findings (2, most expensive first):" in text
    assert text.rstrip("\n").splitlines()[-1].startswith("verdict: ")


def test_an_api_a_library_calls_is_named_where_the_library_calls_it(tmp_path: Path) -> None:
    """Trainer's logging calls xm.mesh_reduce: the reads are transformers', at the line that
    calls the API, not the user's own call of it."""
    trainer = frame("/site-packages/transformers/trainer_pt_utils.py", 194,
                    "nested_xla_mesh_reduce", True)
    events = [{"kind": "sync", "step": i, "seconds": 0.05, "stack": (LIB_MESH, trainer, LOOP),
               "payload": Sync(read=".item() by xm.mesh_reduce", owner="library",
                               api="xm.mesh_reduce", called_by=trainer), "value": 1}
              for i in range(6)]
    report = build_report(build_run(tmp_path / "r", steps=steps(6), events=events))
    (f,) = report.findings
    assert (f.file, f.line) == ("/work/train.py", 30) and f.facts.api == "xm.mesh_reduce"
    assert f.facts.happens_at == trainer and "logging_steps" in f.fix
    assert "call it every N steps" not in f.fix
