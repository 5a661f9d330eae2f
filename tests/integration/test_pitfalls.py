"""Each pitfall script, traced with the real CLI in a fresh process, is named by exactly one
finding of the right kind at its marked line, and by no finding of another kind; the clean script
has none. Also: the library API and the other barriers (xm.mark_step, xp.StepTrace, the parallel
loader) give the same steps and findings as a script traced by the CLI."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scenarios.pitfalls import PITFALLS, PITFALLS_DIR, expected_line
from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.xla


@pytest.fixture(scope="session")
def pitfall_reports(tmp_path_factory) -> dict[str, dict]:
    """`lazyscope trace scenarios/pitfalls/X.py` + `report --format json`, for every pitfall."""
    base = tmp_path_factory.mktemp("pitfalls")

    def trace(name: str) -> tuple[str, dict]:
        out = base / name
        proc = lazyscope_cmd("trace", f"scenarios/pitfalls/{name}.py", "--out", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return name, report_json(out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(trace, PITFALLS))


@pytest.mark.parametrize("name", [n for n, kind in PITFALLS.items() if kind])
def test_pitfall_names_the_planted_line(pitfall_reports, name: str) -> None:
    report = pitfall_reports[name]
    kind = PITFALLS[name]
    line = expected_line(name)
    path = str(PITFALLS_DIR / f"{name}.py")
    assert report["status"] == "ok"
    assert [(f["kind"], f["file"], f["line"]) for f in report["findings"]] == [(kind, path, line)]
    finding = report["findings"][0]
    assert finding["count"] >= 1 and finding["seconds"] > 0
    assert finding["detail"] and finding["fix"]


def test_clean_script_has_no_findings(pitfall_reports) -> None:
    report = pitfall_reports["clean"]
    assert report["status"] == "ok" and report["steps"] == 6
    assert report["findings"] == []


def test_varying_length_names_dimension_and_range(pitfall_reports) -> None:
    [finding] = pitfall_reports["varying_seq_len"]["findings"]
    assert finding["count"] == 6  # 8 lengths, 2 warm-up steps
    assert "varies in dim 1 over 8 values in 5..61" in finding["detail"]
    assert [v["dim"] for v in finding["varying"]] == [1]
    assert finding["varying"][0]["values"] == [5, 9, 17, 25, 33, 40, 48, 61]
    assert "bucket" in finding["fix"] and "lazyscope advise" in finding["fix"]


def test_partial_batch_fix_says_drop_last(pitfall_reports) -> None:
    [finding] = pitfall_reports["partial_batch"]["findings"]
    assert "over {2, 4}" in finding["detail"] and "drop_last=True" in finding["fix"]


def test_sync_findings_count_every_step(pitfall_reports) -> None:
    for name in ("item_per_step", "branch_on_value"):
        [finding] = pitfall_reports[name]["findings"]
        assert finding["count"] == 6 and finding["steps"] == list(range(6)), name


def test_fallback_finding_names_the_op(pitfall_reports) -> None:
    [finding] = pitfall_reports["fallback_op"]["findings"]
    assert finding["op"] == "aten::histc" and finding["count"] == 6
    assert pitfall_reports["fallback_op"]["fallback_ops"] == {"aten::histc": 6}


def test_text_report_lists_findings_before_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "scenarios/pitfalls/item_per_step.py", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip("\n").splitlines()
    verdict_at = max(i for i, ln in enumerate(lines) if ln.startswith("verdict: "))
    findings_at = next(i for i, ln in enumerate(lines) if ln.startswith("findings ("))
    assert findings_at < verdict_at
    assert f"item_per_step.py:{expected_line('item_per_step')} x6" in proc.stdout


_LOOP = """\
import torch, torch_xla
import torch_xla.core.xla_model as xm
dev = torch_xla.device()
w = torch.ones(8, device=dev)
for n in [3, 5, 7, 9, 11]:
    x = torch.ones(4, n).to(dev)
    w = w + x.sum()
    xm.mark_step()  # BARRIER
"""


def _barrier_line(source: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if "# BARRIER" in ln)


def test_library_api_matches_the_cli(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(_LOOP)
    cli_out = tmp_path / "cli"
    proc = lazyscope_cmd("trace", str(script), "--out", str(cli_out))
    assert proc.returncode == 0, proc.stderr
    api_script = tmp_path / "api_loop.py"
    body = textwrap.indent(_LOOP.split("dev = ", 1)[1], "    ")
    api_source = ("import lazyscope\n" + _LOOP.split("dev = ", 1)[0]
                  + f"with lazyscope.trace({str(tmp_path / 'api')!r}):\n    dev = "
                  + body.lstrip())
    api_script.write_text(api_source)
    proc = subprocess.run([sys.executable, str(api_script)], cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env={**__import__("os").environ, "PJRT_DEVICE": "CPU",
                               "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    cli, api = report_json(cli_out), report_json(tmp_path / "api")
    assert cli["steps"] == api["steps"] == 5
    assert cli["compiles"] == api["compiles"] == 5
    summary = [(f["kind"], f["line"], f["count"]) for f in cli["findings"]]
    assert summary == [("recompile", _barrier_line(_LOOP), 3)]
    assert [(f["kind"], f["line"], f["count"]) for f in api["findings"]] == [
        ("recompile", _barrier_line(api_source), 3)]
    assert cli["findings"][0]["varying"] == api["findings"][0]["varying"] == [
        {"input": 0, "dim": 1, "values": [5, 7, 9, 11]}]  # step 0 had one input fewer


def test_steptrace_and_parallel_loader_are_step_barriers(tmp_path: Path) -> None:
    script = tmp_path / "loaders.py"
    script.write_text(textwrap.dedent("""\
        import torch, torch_xla
        import torch_xla.debug.profiler as xp
        import torch_xla.distributed.parallel_loader as pl
        dev = torch_xla.device()
        w = torch.ones(8, device=dev)
        for i in range(3):
            with xp.StepTrace("step", step_num=i):
                w = w * 2
        data = [torch.ones(4, 8) for _ in range(3)]
        for batch in pl.MpDeviceLoader(data, dev):
            w = w + batch.sum()
        torch_xla.sync()
        """))
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", str(script), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = report_json(out)
    # 3 StepTrace exits; the loader syncs before each batch but the first (a StepTrace just
    # marked the step), before the end-of-data fetch and at StopIteration (4); the final sync
    assert report["steps"] == 8, report["per_step"]
    assert report["status"] == "ok"
