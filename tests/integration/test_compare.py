"""`lazyscope compare` end to end on real torch_xla: two cheap policies, a few steps."""

from __future__ import annotations

import json
import re

import pytest

from lazyscope.core.units import nbytes
from tests.conftest import lazyscope_cmd, report_json

pytestmark = pytest.mark.xla


@pytest.fixture(scope="session")
def comparison(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "cmp"
    proc = lazyscope_cmd("compare", "--policies", "max,packed", "--steps", "3", "--mode", "train",
                         "--out", str(out), "decoder", "--max-len", "32", "--batch", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def test_compare_writes_runs_json_png_and_a_table(comparison) -> None:
    out, proc = comparison
    said = proc.stdout.splitlines()
    # before the runs: how the time is estimated, then the estimate from max's first steps
    assert said[0] == ("lazyscope compare: 2 runs of 3 steps, each in a fresh process; the "
                       "time they take follows from the first run's first 3 steps")
    assert said[1].startswith("lazyscope compare: about ") and \
        "for the 2 runs (max ~" in said[1] and ", calibrated on max's first 3 steps" in said[1]
    lines = [ln for ln in said if ln.startswith("[")]
    assert lines[0].startswith("[1/2] max ") and lines[1].startswith("[2/2] packed ")
    assert " left for 1 run" in lines[0] and "left" not in lines[1]
    # each piped line counts in the right number: '3 steps, 1 compile, ...'
    for line in lines[:2]:
        n = int(re.search(r", (\d+) compiles?, ", line).group(1))
        assert f", {n} compile{'' if n == 1 else 's'}, " in line, line
    assert "\x1b" not in proc.stdout + proc.stderr  # piped: no live lines, no colour
    assert "real tok/s" in proc.stdout and "packed / max" in proc.stdout
    data = json.loads((out / "compare.json").read_text())
    rows = {r["policy"]: r for r in data["rows"]}
    assert set(rows) == {"max", "packed"} and data["failed"] == []
    for name in ("max", "packed"):
        r = rows[name]
        assert (out / name / "meta.json").exists() and r["status"] == "ok" and r["steps"] == 3
        # one static shape each: every compilation happens in the first step(s)
        assert r["distinct_shapes"] == 1 and 1 <= r["distinct_graphs"] <= 2
        assert r["compiles"] == r["distinct_graphs"]
        assert len(r["cumulative_wall_s"]) == 3
        assert r["tokens_per_s"] == pytest.approx(r["real_tokens"] / r["wall_s"])
    assert rows["packed"]["padding_efficiency"] >= 0.9
    assert rows["max"]["padding_efficiency"] <= 0.7
    assert rows["packed"]["real_tokens"] > rows["max"]["real_tokens"]
    # each row's largest compiled graph: its own run's peak graph, beside tokens/s
    header = next(ln for ln in proc.stdout.splitlines() if "real tok/s" in ln)
    assert header.index("real tok/s") < header.index("graph mem")
    for name in ("max", "packed"):
        peak = report_json(out / name)["memory"]["peak"]["total"]
        assert rows[name]["graph_memory"] == peak
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"  {name} "))
        assert nbytes(peak) in line
    png = (out / "compare.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 10_000


def test_compare_refuses_to_overwrite_without_force(comparison) -> None:
    out, _ = comparison
    proc = lazyscope_cmd("compare", "--policies", "max", "--steps", "1", "--out", str(out),
                         "decoder")
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"lazyscope: {out} already exists; use --force to replace it"
    assert (out / "compare.json").exists()
