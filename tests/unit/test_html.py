"""The HTML report, the new plots, the scalar series and the profile window's logic, on saved
runs and hand-made report dicts (no XLA)."""

from __future__ import annotations

import base64
import re
from dataclasses import replace

import pytest

from lazyscope.analyze.buckets import advise
from lazyscope.analyze.findings import Finding, RecompileFacts, SyncFacts, VaryingInput
from lazyscope.analyze.report import CompilationRow, build_report
from lazyscope.backends.base import Recorder
from lazyscope.backends.profiling import ProfileWindow, default_steps, parse_profile_steps
from lazyscope.cli import main
from lazyscope.core.errors import UsageError
from lazyscope.model import Change, Frame, Meta
from lazyscope.render import RENDERERS
from lazyscope.render.html import fmt_cell, render_html
from lazyscope.render.plots import step_time_split, write_cumulative, write_time_split
from lazyscope.render.tensorboard import scalar_series
from lazyscope.render.views import write_views
from lazyscope.store import RunWriter, load_run
from tests.builders import build_run

PNG = b"\x89PNG\r\n\x1a\n"


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)


def _report(tmp_path, **replaced):
    """A typed report of a small built run, with fields replaced."""
    run = build_run(tmp_path / "r", steps=[{"wall_s": 0.1, "compile_count": 0}] * 3)
    return replace(build_report(run), **replaced)


def _finding(kind: str, line: int, seconds: float, detail: str, facts) -> Finding:
    return Finding(kind, "a.py", line, "main", [Frame("a.py", line, "main"),
                                                 Frame("a.py", 40, "loop")],
                   3, [1, 2, 3], 3, seconds, detail, "do this", facts)


def test_a_run_with_nothing_to_say_has_only_the_verdict(tmp_path) -> None:
    page = render_html(_report(tmp_path))
    assert "no recompilation in steady state" in page
    assert _sections(page) == ["per-step"]
    for absent in ("Findings", "Padding advice", "Compilations", "Ranks"):
        assert absent not in page


def test_every_section_when_present(tmp_path) -> None:
    """Findings worst first, with their typed facts written as text (a frame as file:line,
    never JSON); long tables fold to their first rows with the count of the rest."""
    sync = _finding("sync", 7, 0.5, "loss.item() x3", SyncFacts(
        reads={".item()": 3}, executions=3, closure="",
        happens_at=Frame("/site-packages/transformers/masking_utils.py", 776,
                         "find_packed_sequence_indices", True)))
    recompile = _finding("recompile", 9, 4.0, "seq dim varies", RecompileFacts(
        compiled_at=Frame("a.py", 40, "loop"), changes=[
            Change("x", "dim", 1, 17, 33, origin=Frame("a.py", 9, "main"))],
        varying=[VaryingInput("x", "dim", 1, [17, 33])], graphs=2, dynamic=[], classes={},
        verdict="churn", runs=[1, 1]))
    rows = [CompilationRow(step=i, seconds=1.5, graph=f"g{i}", phase="graph", cause="sync",
                           owner="user", site="a.py:40 (loop)", executions=1)
            for i in range(25)]
    advice = advise([17, 33, 64, 90, 120, 5, 9] * 12, batch=4, top=128, horizon=40)
    report = _report(tmp_path, findings=[recompile, sync], compilations=rows,
                     compilations_total=25, advice=advice)
    page = render_html(report, {"timeline": PNG + b"x"})
    assert _sections(page) == ["findings", "plots", "compilations", "advice", "per-step"]
    assert page.index("recompile") < page.index("loss.item()")
    assert "masking_utils.py:776 (find_packed_sequence_indices)" in page
    assert "x dim 1: 17 -&gt; 33 (made at a.py:9 (main))" in page
    assert "x dim 1: {17, 33}" in page and "do this" in page
    assert "{&quot;" not in page and '{"file"' not in page  # no JSON in a cell
    assert "5 more rows</summary>" in page  # 25 compilations: 20 shown, 5 folded
    assert f"<b>{advice.recommended.name}</b>" in page and "predicted real tokens/s" in page
    data = base64.b64encode(PNG + b"x").decode()
    assert f'src="data:image/png;base64,{data}"' in page


def test_self_contained_escaped_and_embeddable(tmp_path) -> None:
    bad = _finding("sync", 3, 0.1, '"><img src=x onerror=alert(1)>',
                   SyncFacts(reads={}, executions=0, closure=""))
    report = _report(tmp_path, verdict="<script>alert(1)</script>", findings=[bad])
    page = render_html(report)
    assert "<script" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page and "@import" not in page
    fragment = render_html(report, fragment=True)
    assert "<html" not in fragment and "<body" not in fragment
    css = re.search(r"<style>(.*?)</style>", fragment, re.S).group(1)
    selectors = [rule.split("{")[0] for rule in css.split("}") if "{" in rule]
    assert selectors and all(all(sel.strip().startswith(".lazyscope-report")
                                 for sel in rule.split(",")) for rule in selectors)


def test_run_page_has_compilations_and_plots(data_run) -> None:
    path = data_run("dynamic20")
    report = build_report(load_run(path))
    rows = report.compilations
    assert len(rows) == 20 and rows[0].step == 0 and rows[0].graph
    assert RENDERERS["html"] is render_html
    assert write_views(report, path) == []
    page = (path / "report.html").read_text()
    assert "Compilations (20)" in page and page.count("data:image/png;base64,") == 3
    assert "recompiles in steady state: 19 recompilations" in page
    assert "compiled at" in page and "what changed" in page
    for png in ("timeline.png", "time_split.png", "cumulative.png"):
        assert (path / png).read_bytes()[:8] == PNG


def test_report_format_html_writes_file(data_run, capsys) -> None:
    path = data_run("static20")
    assert main(["report", str(path), "--format", "html"]) == 0
    assert capsys.readouterr().out.strip() == str(path / "report.html")
    text = (path / "report.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and "no recompilation in steady state" in text


def test_time_split_adds_up(data_run, tmp_path) -> None:
    run = load_run(data_run("dynamic20"))
    report = build_report(run)
    split = step_time_split(report)
    for i, s in enumerate(run.steps):
        parts = [split[k][i] for k in ("compile", "execute", "transfer", "host")]
        assert min(parts) >= 0
        assert sum(parts) == pytest.approx(max(s.wall_s, sum(parts[:3])))
    assert sum(split["compile"]) == pytest.approx(sum(s.compile_s for s in run.steps))
    assert write_time_split(report, tmp_path / "t.png").read_bytes()[:8] == PNG
    assert write_cumulative(report, tmp_path / "c.png").stat().st_size > 5000


def test_plots_take_literal_text_never_mathtext(data_run, tmp_path) -> None:
    """A script argument like '$\\foo$' reaches the plot title: drawn as text, never parsed."""
    run = load_run(data_run("static20"))
    run.meta.args = ["--name", "$\\foo$", "$x^2$"]
    report = build_report(run)
    assert write_views(report, tmp_path) == []
    assert (tmp_path / "timeline.png").read_bytes()[:8] == PNG


def test_long_runs_are_bucketed_for_every_view(tmp_path) -> None:
    import numpy as np

    writer = RunWriter(tmp_path / "long", Meta(target="t"))
    for i in range(30_000):
        writer.write_step(i, {"wall_s": 0.01 + 0.001 * (i % 7), "compile_count": 0,
                              "compile_s": 0.0, "execute_count": 1, "execute_s": 0.005})
    writer.finish("ok")
    report = build_report(load_run(tmp_path / "long"))
    series = report.series
    assert series.bucketed and len(series.step) <= 2000 and int(series.size.sum()) == 30_000
    assert np.all(series.wall_min <= series.wall_mean) and np.all(series.wall_mean <= series.wall_max)
    assert series.cumulative_s[-1] == pytest.approx(report.summary.wall_seconds)
    out = __import__("json").loads(RENDERERS["json"](report))
    assert out["per_step_bucketed"] and len(out["per_step"]) == len(series.step)
    assert write_views(report, tmp_path / "long") == []


def test_scalar_series(data_run) -> None:
    run = load_run(data_run("dynamic20"))
    series = scalar_series(build_report(run))
    assert [v for _, v in series["lazyscope/compilations"]] == [1.0] * 20
    cum = [v for _, v in series["lazyscope/cumulative_wall_s"]]
    assert cum[-1] == pytest.approx(sum(s.wall_s for s in run.steps))
    assert cum == sorted(cum)


def test_parse_profile_steps() -> None:
    assert parse_profile_steps("2:5") == (2, 5)
    for bad in ("5", "a:b", "3:3", "-1:2", "1:2:3"):
        with pytest.raises(UsageError):
            parse_profile_steps(bad)
    assert default_steps(None) == (2, 5) and default_steps(2) == (0, 2)


class FakeBackend:
    """Records when the profiler starts and stops (pure logic of the window)."""

    def __init__(self, fail: bool = False):
        self.calls: list[tuple[str, int]] = []
        self.recorder: Recorder | None = None
        self.fail = fail

    def start_profile(self, logdir) -> None:
        if self.fail:
            raise RuntimeError("no profiler here")
        self.calls.append(("start", self.recorder.next_index))

    def stop_profile(self) -> None:
        self.calls.append(("stop", self.recorder.next_index))

    def profile_step(self, index) -> None:
        self.calls.append(("mark", index))


# each step of the window is marked from the boundary before it to the one after it; the last
# mark ends (None) before the capture stops
@pytest.mark.parametrize("window, steps, calls, captured", [
    ((1, 3), 6, [("start", 1), ("mark", 1), ("mark", 2), ("mark", None), ("mark", None),
                 ("stop", 4)], [1, 3]),   # stops in step 3's barrier (index 4 next)
    ((0, 2), 6, [("start", 0), ("mark", 0), ("mark", 1), ("mark", None), ("mark", None),
                 ("stop", 3)], [0, 2]),
    ((2, 9), 4, [("start", 2), ("mark", 2), ("mark", 3), ("mark", 4), ("mark", None),
                 ("stop", 4)], [2, 4]),                # run ended first: closed at the end
    ((5, 7), 3, [], None),                              # never reached
])
def test_profile_window(tmp_path, window, steps, calls, captured) -> None:
    backend = FakeBackend()
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    backend.recorder = rec
    pw = ProfileWindow(tmp_path / "tb", *window)
    pw.attach(backend, rec)
    for _ in range(steps):
        rec.step({"wall_s": 0.1})
    pw.close(rec.next_index)
    assert backend.calls == calls
    assert pw.info()["captured_steps"] == captured
    assert ("error" in pw.info()) == (captured is None)


def test_profile_window_failure_never_raises(tmp_path) -> None:
    backend = FakeBackend(fail=True)
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    backend.recorder = rec
    pw = ProfileWindow(tmp_path / "tb", 0, 2)
    pw.attach(backend, rec)
    rec.step({"wall_s": 0.1})
    pw.close(rec.next_index)
    assert pw.info()["error"].startswith("could not start the profiler: RuntimeError")


def test_compare_directory_page(tmp_path, capsys) -> None:
    import json

    from lazyscope.render.plots import write_timeline
    from tests.conftest import DATA

    png = write_timeline(build_report(load_run(DATA / "xla" / "static20")),
                         tmp_path / "compare.png")
    compare = {"scenario": "decoder", "steps": 40, "args": ["--preset", "tiny"],
               "rows": [{"policy": "max", "compiles": 2, "wall_s": 13.0, "padding_efficiency": 0.5},
                        {"policy": "packed", "compiles": 2, "wall_s": 4.0,
                         "padding_efficiency": 0.95}],
               "ratios": {"packed_vs_max": 3.25}, "failed": []}
    (tmp_path / "compare.json").write_text(json.dumps(compare))
    assert main(["report", str(tmp_path), "--format", "html"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert "packed_vs_max" in page and "0.95" in page and "lazyscope compare: decoder" in page
    assert page.count("data:image/png;base64,") == 1 and png.exists()
    (tmp_path / "compare.json").write_text("[1, 2]")
    assert main(["report", str(tmp_path), "--format", "html"]) == 3
    assert "not a lazyscope comparison" in capsys.readouterr().err


def test_tensorboard_count_table_and_links(data_run) -> None:
    from lazyscope.commands.tensorboard import urls
    from lazyscope.render.tensorboard import MAX_COUNT_ROWS, count_table

    run = load_run(data_run("dynamic20"))
    report = build_report(run)
    table = count_table(report).splitlines()
    assert table[0].startswith("| step | compilations | executions | to device | from device |")
    assert len(table) == 2 + len(run.steps)  # every step of a short run
    cells = [row.strip("|").split("|") for row in table[2:]]
    assert [int(c[1]) for c in cells] == [s.compile_count for s in run.steps]
    assert urls("127.0.0.1", 6006) == {
        "scalars": "http://127.0.0.1:6006/?smoothing=0#timeseries",
        "scalars (legacy)": "http://127.0.0.1:6006/#scalars&_smoothingWeight=0",
        "counts": "http://127.0.0.1:6006/#text", "profile": "http://127.0.0.1:6006/#profile"}
    assert MAX_COUNT_ROWS < 1000


def test_the_joint_view_of_a_pods_profile(tmp_path) -> None:
    """A session holding several hosts' captures (a pod's --profile): the link to XProf's
    trace viewer with every host selected (10 at most: XProf loads no more at once)."""
    from lazyscope.commands.tensorboard import joint_view, joint_view_url

    profile = tmp_path / "plugins" / "profile"
    assert joint_view(tmp_path) is None
    (profile / "2026_01_01_00_00_00").mkdir(parents=True)
    (profile / "2026_01_01_00_00_00" / "vm.xplane.pb").write_bytes(b"")  # one host: no pod
    assert joint_view(tmp_path) is None
    (profile / "run7").mkdir()
    for h in (10, 0, 2, 1):
        (profile / "run7" / f"host{h}.xplane.pb").write_bytes(b"")
    (profile / "run7" / "host0.trace.json.gz").write_bytes(b"")
    session, hosts = joint_view(tmp_path) or ("", [])
    assert (session, hosts) == ("run7", ["host0", "host1", "host2", "host10"])
    assert joint_view_url("127.0.0.1", 6006, session, hosts) == (
        "http://127.0.0.1:6006/?run=run7&tool=trace_viewer%40&hosts=host0%2Chost1%2Chost2%2C"
        "host10#profile")
    many = [f"host{h}" for h in range(12)]
    assert joint_view_url("h", 1, "s", many).count("%2C") == 9


def test_tensorboard_count_table_of_a_long_run(tmp_path) -> None:
    from lazyscope.render.tensorboard import MAX_COUNT_ROWS, count_table

    writer = RunWriter(tmp_path / "long", Meta(target="t"))
    for i in range(3 * MAX_COUNT_ROWS):
        writer.write_step(i, {"wall_s": 0.01, "compile_count": 1 if i % 100 == 7 else 0,
                              "execute_count": 1, "from_device_count": 0})
    writer.finish("ok")
    lines = count_table(build_report(load_run(tmp_path / "long"))).splitlines()
    assert lines[0].startswith(f"{3 * MAX_COUNT_ROWS} steps; listed: the 6 first steps that")
    assert [ln.split("|")[1].strip() for ln in lines[4:]] == ["7", "107", "207", "307", "407",
                                                            "507"]


def test_device_memory_scalars_where_measured_and_nothing_where_not(tmp_path) -> None:
    steps = [{"wall_s": 0.1, "compile_count": 0}] * 3
    dev = build_run(tmp_path / "dev", steps=steps, info={"device_memory": {
        "source": "an allocator", "used": [100, 300, 200], "step_peaks": [150, 400, 250],
        "reserved": [512, 512, 1024], "limit": 4096}})
    series = scalar_series(build_report(dev))
    assert series["lazyscope/device_memory_used_bytes"] == [(0, 100.0), (1, 300.0), (2, 200.0)]
    assert series["lazyscope/device_memory_step_peak_bytes"] == [(0, 150.0), (1, 400.0),
                                                                 (2, 250.0)]
    assert series["lazyscope/device_memory_reserved_bytes"][-1] == (2, 1024.0)
    # the run's peak is the largest step peak when the runtime gave no overall one
    device = build_report(dev).memory.device
    assert device.peak == 400 and device.headroom == 4096 - 400
    cpu = build_run(tmp_path / "cpu", steps=steps, info={"device_memory": {
        "unmeasured": "the runtime does not report device memory (UNIMPLEMENTED)"}})
    assert not [t for t in scalar_series(build_report(cpu)) if "device_memory" in t]
    plain = build_run(tmp_path / "plain", steps=steps)
    assert not [t for t in scalar_series(build_report(plain)) if "device_memory" in t]


def test_scalar_records_are_tensorboards_own_framing(tmp_path) -> None:
    """The records written with google-crc32c's CRC are byte for byte TensorBoard's
    RecordWriter's, and TensorBoard's own loader reads the scalars back."""
    pytest.importorskip("google_crc32c")
    import io

    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.summary.writer.record_writer import RecordWriter
    from tensorboard.util import tensor_util

    from lazyscope.render.tensorboard import _record_writer, write_scalars

    payloads = [b"", b"x", bytes(range(256)) * 5]
    mine, theirs = io.BytesIO(), io.BytesIO()
    fast, slow = _record_writer(mine), RecordWriter(theirs)
    assert type(fast) is not RecordWriter
    for data in payloads:
        fast.write(data)
        slow.write(data)
    assert mine.getvalue() == theirs.getvalue()

    writer = RunWriter(tmp_path / "run", Meta(target="t"))
    for i in range(5):
        writer.write_step(i, {"wall_s": 0.01 * (i + 1), "compile_count": 0})
    writer.finish("ok")
    path = write_scalars(build_report(load_run(tmp_path / "run")), tmp_path / "tb")
    times = [(e.step, round(float(tensor_util.make_ndarray(v.tensor)), 3))
             for e in EventFileLoader(str(path)).Load()  # scalars read back as tensors
             for v in e.summary.value if v.tag == "lazyscope/step_time_ms"]
    assert times == [(i, 10.0 * (i + 1)) for i in range(5)]


def test_text_summary_is_tensorboards_text_pb() -> None:
    """The count table's Summary, built from the protos, is the bytes of TensorBoard's own
    text_pb (which lazyscope no longer imports: it pulls in the TensorFlow stub)."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    from lazyscope.render.tensorboard import text_summary

    for text in ("", "| step | compiles |\n|---|---|\n| 0 | 1 |", "naïve → ü"):
        ours = text_summary("lazyscope/counts", text, "lazyscope's integer series").SerializeToString()
        assert ours == text_pb("lazyscope/counts", text,
                               description="lazyscope's integer series").SerializeToString()


def test_a_share_is_a_percentage_and_a_ratio_stays_a_number() -> None:
    """The compile bill's "of compile time" column read 0.998 and 0.00197."""
    assert fmt_cell("share", 0.998) == ("100%", True)
    assert fmt_cell("late_share", 0.25) == ("25%", True)
    assert fmt_cell("ratio", 0.998) == ("0.998", True)
