"""The torch.compile path on a saved run (tests/data/compile/tour: a recompiling training step
with its backward compiles, a graph break, three functions that hit the recompile limit),
without running dynamo: every finding kind, in the compile backend's own words."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from lazyscope.analyze.report import build_report
from lazyscope.backends.pytorch.dynamo import parse_guard_failures, split_hints
from lazyscope.render import RENDERERS
from lazyscope.render.views import write_views
from lazyscope.store import load_run

DATA = Path(__file__).resolve().parents[1] / "data" / "compile" / "tour"
#: torch_xla's vocabulary: none of it may reach a report of another backend
XLA_TERMS = re.compile(r"torch_xla|\bXLA\b|xm\.|add_step_closure|mark_step|HLO|"
                       r"device-to-host|XLA_|PT_XLA|--no-graph-shapes|StepTrace")


@pytest.fixture
def tour(tmp_path: Path) -> Path:
    shutil.copytree(DATA, tmp_path / "tour")
    return tmp_path / "tour"


def test_every_finding_kind_of_a_compile_run(tour) -> None:
    report = build_report(load_run(tour))
    kinds = {f.kind for f in report.findings}
    assert kinds == {"recompile", "graph_break", "eager_fallback"}
    step = next(f for f in report.findings if f.kind == "recompile"
                and f.compiled_at and f.compiled_at.function == "forward")
    source = Path(step.file).name
    assert source == "tour.py" and step.line == 40  # the call, not loss.backward()
    assert {c.input for c in step.changes} == {"x", "mask"}  # every argument that changed
    assert "backward compile" in step.detail
    limit = [f for f in report.findings if f.kind == "eager_fallback"]
    assert len(limit) == 3 and all("runs eagerly" in f.detail and "(3)" in f.detail
                                   for f in limit)
    brk = next(f for f in report.findings if f.kind == "graph_break")
    assert brk.line == 27 and "Tensor.item()" in brk.facts.reason
    assert report.summary.backward_compile_seconds > 0


def test_no_xla_wording_is_reachable_from_a_compile_run(tour) -> None:
    report = build_report(load_run(tour))
    assert write_views(report, tour) == []
    texts = [RENDERERS["text"](report), RENDERERS["json"](report),
             (tour / "report.html").read_text()]
    for f in report.findings + report.notes:
        texts += [f.detail, f.fix]
    for text in texts:
        # file paths may say anything; the words lazyscope chose may not
        assert not XLA_TERMS.search(text.replace(str(tour), "")), XLA_TERMS.search(text)
    out = json.loads(RENDERERS["json"](report))
    assert out["executions"] is None and out["transfers_from_device"] is None  # not measured
    assert "executions" not in RENDERERS["text"](report)


def test_guard_failures_are_parsed_into_changes() -> None:
    (c,) = parse_guard_failures("0/0: tensor 'x' size mismatch at index 1. expected 64, actual 97")
    assert (c.input, c.what, c.index, c.before, c.after) == ("x", "dim", 1, 64, 97)
    (v,) = parse_guard_failures("0/3: L['n'] == 2")
    assert (v.input, v.what, v.before) == ("n", "value", "2")
    (s,) = parse_guard_failures("1/0: ___stack0 == 3.25  # return h / (")
    assert s.input == "the value passed across the graph break" and s.text == "___stack0 == 3.25"
    (d,) = parse_guard_failures("tensor 'L['y']' dtype mismatch. expected Float, actual Half")
    assert (d.input, d.what, d.before, d.after) == ("y", "dtype", "Float", "Half")
    (g,) = parse_guard_failures("0/0: ___check_obj_id(L['self'], 1234)")
    assert g.what == "guard"
    assert parse_guard_failures(None) == [] and parse_guard_failures("") == []


def test_graph_break_hints_are_split_from_the_reason() -> None:
    reason, hints = split_hints("Unsupported Tensor.item() call\n  Explanation: no.\n"
                                "  Hint: Set capture_scalar_outputs = True\n  Hint: Or not.")
    assert reason == "Unsupported Tensor.item() call Explanation: no."
    assert hints == ["Set capture_scalar_outputs = True", "Or not."]
