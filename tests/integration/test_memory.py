"""Device memory on real XLA:CPU runs (issue 32), each program traced in a fresh process:
each graph's bytes against torch_xla's own Post Compilation Analysis of the same program run
untraced, the lost-aliasing finding at the rebinding line only, growing memory, the bucket
that makes the peak, the out-of-memory path and the --max-graph-memory gate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, trace_all

pytestmark = [pytest.mark.xla]

PROGRAMS = REPO / "tests" / "programs" / "memory"
_SIZE = re.compile(r"^Post Compilation Analysis: (?P<key>[A-Za-z ]+ size): (?P<gb>[0-9.]+) GB$",
                   re.M)
_FIELDS = {"Graph input size": "inputs", "Graph output size": "outputs",
           "Aliased Input size": "aliased", "Intermediate tensor size": "intermediates",
           "Compiled program size": "program"}


def _line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def xla_sizes(script: Path, tmp: Path) -> list[dict[str, str]]:
    """torch_xla's own Post Compilation Analysis of ``script`` run untraced: per compilation,
    each size as torch_xla prints it (GB, 6 decimals)."""
    debug = tmp / f"{script.stem}.debug.txt"
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PT_XLA_DEBUG_LEVEL": "1",
           "PT_XLA_DEBUG_FILE": str(debug)}
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=300,
                   capture_output=True)
    graphs: list[dict[str, str]] = []
    for m in _SIZE.finditer(debug.read_text()):
        if m["key"] == "Graph input size":
            graphs.append({})
        graphs[-1][_FIELDS[m["key"]]] = m["gb"]
    return graphs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    base = tmp_path_factory.mktemp("memory")
    return trace_all(base, {name: PROGRAMS / f"{name}.py"
                            for name in ("inplace", "rebind", "growing", "bucketed")})


@pytest.mark.parametrize("name", ["inplace", "rebind"])
def test_graph_bytes_equal_xla_own_analysis(runs, tmp_path: Path, name: str) -> None:
    expected = xla_sizes(PROGRAMS / f"{name}.py", tmp_path)
    _, report = runs[name]
    graphs = report["memory"]["graphs"]
    assert len(graphs) == len(expected) == 2
    for ours, theirs in zip(graphs, expected, strict=True):
        assert {k: f"{ours[k] / 2**30:.6f}" for k in theirs} == theirs
        assert ours["total"] == (ours["inputs"] + ours["outputs"] - ours["aliased"]
                                 + ours["intermediates"] + ours["program"])
    steady = expected[1]
    if name == "inplace":  # the weight's 4 MiB buffer is donated
        assert steady["aliased"] == "0.003906"
    else:  # rebound: nothing donated, the weight held twice at the barrier
        assert steady["aliased"] == "0.000000" and steady["outputs"] == "0.007843"
    rows = report["compilations"]
    assert [r["memory_bytes"] for r in rows] == [g["total"] for g in graphs]


def test_lost_aliasing_at_the_rebinding_line_only(runs) -> None:
    _, healthy = runs["inplace"]
    assert [f for f in healthy["findings"] if f["kind"] == "lost_aliasing"] == []
    assert healthy["clean"] is True
    _, report = runs["rebind"]
    (finding,) = [f for f in report["findings"] if f["kind"] == "lost_aliasing"]
    script = PROGRAMS / "rebind.py"
    assert finding["file"] == str(script)
    assert finding["line"] == _line_of(script, "w = (w - lr * w.grad)")
    assert finding["lost_bytes"] == 1024 * 1024 * 4 and finding["aliased_bytes"] == 0
    assert "w -= lr * w.grad" in finding["fix"]
    assert "f32[1024,1024]" in finding["detail"]


def test_growing_memory_at_the_line_that_keeps_tensors(runs) -> None:
    """The graphs grow because a kept tensor grows: one finding at the line that keeps it, the
    recompilation's, which says the memory too (never a second finding for the same line)."""
    _, report = runs["growing"]
    script = PROGRAMS / "growing.py"
    line = _line_of(script, "history = torch.cat")
    (finding,) = report["findings"]
    assert (finding["kind"], finding["file"], finding["line"]) == ("recompile", str(script), line)
    grown = re.search(r"([\d.]+) KiB more per graph", finding["detail"])
    # one step's activations, to the ~1 KiB of the 6 decimals of GiB torch_xla prints
    assert grown and abs(float(grown[1]) * 1024 - 64 * 256 * 4) < 1 << 10, finding["detail"]
    _, healthy = runs["inplace"]
    assert not [f for f in healthy["findings"] if f["kind"] == "growing_memory"]


def test_largest_bucket_is_the_peak(runs) -> None:
    _, report = runs["bucketed"]
    mem = report["memory"]
    script = PROGRAMS / "bucketed.py"
    assert mem["peak_at"]["line"] == _line_of(script, "torch_xla.sync()")
    assert mem["peak"]["shape"].startswith("f32[16,256,64] (made at")
    assert mem["peak"]["total"] == max(g["total"] for g in mem["graphs"])
    bucket = {g["total"]: g["shape"] for g in mem["graphs"]}
    assert len(bucket) >= 3


def test_check_max_graph_memory(runs) -> None:
    run_dir, _ = runs["rebind"]
    over = lazyscope_cmd("check", str(run_dir), "--max-graph-memory", "1MB")
    assert over.returncode == 1, over.stdout + over.stderr
    assert "FAIL max-graph-memory" in over.stdout and "rebind.py:" in over.stdout
    under = lazyscope_cmd("check", str(run_dir), "--max-graph-memory", "1GB")
    assert under.returncode == 0, under.stdout + under.stderr
    assert "ok   max-graph-memory" in under.stdout
    share = lazyscope_cmd("check", str(run_dir), "--max-graph-memory", "80%")
    assert share.returncode == 2 and "not measured" not in share.stdout
    assert "memory limit" in share.stderr


def test_device_memory_not_measured_on_cpu(runs) -> None:
    _, report = runs["inplace"]
    note = report["memory"]["device_note"]
    assert note.startswith("not measured: ") and "UNIMPLEMENTED" in note
    assert "device" not in report["memory"]


def test_out_of_memory_is_one_line_exit_6_run_kept(tmp_path: Path) -> None:
    out = tmp_path / "oom"
    script = PROGRAMS / "oom.py"
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(script))
    assert proc.returncode == 6, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    sync_line = _line_of(script, "    torch_xla.sync()")
    assert f"out of device memory at {script}:{_line_of(script, 'raise RuntimeError')}" in line
    assert "XLA runtime: allocating 196.0 MiB failed, 134.4 MiB free hbm (61.6 MiB over)" in line
    assert f"the graph compiled at {script}:{sync_line} (step 1) holds" in line
    assert "the run so far is kept" in line
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["info"]["out_of_memory"]["kind"] == "runtime"
    report = json.loads(lazyscope_cmd("report", str(out), "--format", "json").stdout)
    oom = report["memory"]["out_of_memory"]
    assert oom["requested"] == 196 << 20 and oom["graph"]["step"] == 1
    assert oom["line"] in line
