"""The report of saved runs (real XLA:CPU traces in tests/data/xla, schema-1 runs in
tests/data/v1): summary, verdict, findings, JSON shape, plots, advice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lazyscope.analyze.report import build_report
from lazyscope.render import RENDERERS
from lazyscope.render.views import write_views
from lazyscope.store import load_run

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def copy(tmp_path: Path):
    def make(name: str) -> Path:
        dst = tmp_path / name.replace("/", "_")
        shutil.copytree(DATA / name, dst)
        return dst
    return make


def test_dynamic_run_recompiles_at_the_accumulating_line(copy) -> None:
    report = build_report(load_run(copy("xla/dynamic20")))
    s = report.summary
    assert s.steps == 20 and s.compiles == 20 and s.distinct_graphs == 20
    (f,) = report.findings
    assert f.kind == "recompile" and f.count == 19
    # the run was recorded when the scenario lived in lazyscope/scenarios/: read today's copy
    source = Path(__file__).resolve().parents[2] / "scenarios" / Path(f.file).name
    assert f.file.endswith("lazytensor_dynamic.py") and "torch.cat" in source.read_text(
    ).splitlines()[f.line - 1]  # the line to change is the accumulation
    assert f.compiled_at is not None and f.compiled_at.line != f.line
    assert "grows at every compilation" in f.fix and "concatenated" in f.fix
    assert report.verdict.startswith("recompiles in steady state: 19 recompilations")
    assert not report.clean


def test_static_run_is_clean(copy) -> None:
    report = build_report(load_run(copy("xla/static20")))
    assert report.summary.compiles == 1 and report.findings == [] and report.clean
    assert report.verdict == "no recompilation in steady state: 1 graph compiled and reused"


def test_json_has_the_documented_keys(copy) -> None:
    out = json.loads(RENDERERS["json"](build_report(load_run(copy("xla/dynamic20")))))
    for key in ("steps", "compiles", "executions", "verdict", "clean", "findings", "notes",
                "per_step", "run_notes", "capabilities", "events", "compilations"):
        assert key in out, key
    assert out["status"] == "ok" and len(out["per_step"]) == 20
    f = out["findings"][0]
    for key in ("kind", "file", "line", "function", "stack", "count", "steps", "seconds",
                "detail", "fix", "compiled_at", "changes"):
        assert key in f, key
    assert f["changes"][0]["what"] == "dim" and f["stack"][0]["line"] == f["line"]


def test_text_ends_with_the_verdict(copy) -> None:
    text = RENDERERS["text"](build_report(load_run(copy("xla/dynamic20"))))
    assert text.rstrip().splitlines()[-1].startswith("verdict: recompiles in steady state")


def test_incomplete_run_verdict(copy) -> None:
    run_dir = copy("xla/dynamic20")
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["status"] = "running"
    (run_dir / "meta.json").write_text(json.dumps(meta))
    report = build_report(load_run(run_dir))
    assert report.summary.status == "incomplete"
    assert report.verdict.startswith("incomplete run (20 finished steps)")


def test_views_are_written_in_one_place(copy) -> None:
    run_dir = copy("xla/dynamic20")
    assert write_views(build_report(load_run(run_dir)), run_dir) == []
    for name in ("timeline.png", "time_split.png", "cumulative.png"):
        png = run_dir / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    page = (run_dir / "report.html").read_text()
    assert "Findings, worst first" in page and "data:image/png;base64," in page


def test_a_schema_1_run_still_renders(copy) -> None:
    run_dir = copy("v1/dynamic20")
    report = build_report(load_run(run_dir))
    assert report.summary.steps == 20 and report.findings[0].kind == "recompile"
    assert write_views(report, run_dir) == []
    assert RENDERERS["text"](report).rstrip().splitlines()[-1].startswith("verdict: ")


def test_bucket_advice_in_every_report_of_a_recompiling_decoder_run(copy) -> None:
    run_dir = copy("v1/decoder_longest6")
    report = build_report(load_run(run_dir))
    advice = report.advice
    assert advice is not None and advice.seq_len_values == 5
    assert advice.best_buckets.boundaries[-1] == advice.lengths.top
    assert "padding advice: the padded sequence length took 5 values" in \
        RENDERERS["text"](report)
    page = RENDERERS["html"](report)
    assert "Padding advice" in page and advice.recommended.name in page
    data = json.loads(RENDERERS["json"](report))["advice"]
    assert data["recommended"]["name"] == advice.recommended.name
    assert data["seq_len_values"] == 5
    assert "advice" not in json.loads(RENDERERS["json"](build_report(load_run(copy(
        "xla/static20")))))


def test_runtime_counts_are_shown_beside_the_totals(copy) -> None:
    run_dir = copy("xla/static20")
    meta_path = run_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta.setdefault("info", {})["runtime_counts"] = {"CompileTime": 1, "ExecuteTime": 20}
    meta_path.write_text(json.dumps(meta))
    report = build_report(load_run(run_dir))
    text = RENDERERS["text"](report)
    assert "  runtime counts  CompileTime 1, ExecuteTime 20\n" in text
    assert json.loads(RENDERERS["json"](report))["runtime_counts"] == {"CompileTime": 1,
                                                                      "ExecuteTime": 20}
    # a run without them (older runs, other backends) has no such line
    plain = build_report(load_run(copy("xla/dynamic20")))
    assert "runtime counts" not in RENDERERS["text"](plain)
    assert "runtime_counts" not in json.loads(RENDERERS["json"](plain))


def test_library_syncs_are_named_by_the_api_that_made_them(tmp_path: Path) -> None:
    """Reads inside one torch_xla API (xm.rendezvous reads through helpers of its own: a list
    comprehension, str.split) are one note entry named by the API, not by each helper."""
    from lazyscope.model import OWNER_LIBRARY, Capabilities, Frame, Meta, Sync
    from lazyscope.model.steps import STEP_FIELDS_V2
    from lazyscope.store import RunWriter

    user = Frame("/home/me/train.py", 178, "test_loop_fn", False)
    # steps of wall time only: the fields it writes are the ones it measures
    writer = RunWriter(tmp_path / "run", Meta(target="t", capabilities=Capabilities(
        step_fields=list(STEP_FIELDS_V2))))
    for i, helper in enumerate(("xla_rendezvous", "<listcomp>", "split")):
        stack = (Frame("/sp/torch_xla/core/xla_model.py", 10 + i, helper, True), user)
        writer.write_event("sync", 1, stack=stack, value=1,
                           payload=Sync(read=".item() by xm.rendezvous", owner=OWNER_LIBRARY,
                                        api="xm.rendezvous"))
    writer.write_step(0, {"wall_s": 0.01})
    writer.write_step(1, {"wall_s": 0.01})
    writer.finish("ok")
    report = build_report(load_run(tmp_path / "run"))
    (note,) = [n for n in report.run_notes if n.startswith("library syncs")]
    assert note == ("library syncs (not findings): 3 reads by xm.rendezvous called at "
                    "/home/me/train.py:178")
    assert report.findings == []
