"""`lazyscope advise` on a plain user script traced on real torch_xla (XLA:CPU): the lengths
come from the run's own graphs (no annotation); the code `--emit` prints, pasted into the
script, runs in a real DataLoader and bounds the graphs; `diff` shows the gain.

Three traces of a tiny model (an embedding and a linear layer, 16 batches of 4): about a
minute in all here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.xla

SCRIPT = REPO / "tests" / "programs" / "padding_longest.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("advise")
    before = base / "before"
    proc = lazyscope_cmd("trace", "--out", str(before), "--no-views", str(SCRIPT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    emit = lazyscope_cmd("advise", str(before), "--emit", "--no-model-changes")
    assert emit.returncode == 0, emit.stderr
    code = base / "loader.py"
    code.write_text(emit.stdout)
    after = base / "after"
    proc = lazyscope_cmd("trace", "--out", str(after), "--no-views", str(SCRIPT),
                         "--loader", str(code))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"before": before, "after": after, "code": code}


def test_advise_reads_a_plain_scripts_graphs(runs) -> None:
    proc = lazyscope_cmd("advise", str(runs["before"]))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "lengths: from dim 1 of the s64[4,?] input of the run's graphs" in out
    assert "horizon: 100,000 steps of 4 sequences (default: a long training run" in out
    assert "calibrated on the run" in out and "pad to longest" in out
    assert "(what this run does)" in out
    assert out.count("recommended: ") == 1
    data = json.loads(lazyscope_cmd("advise", str(runs["before"]), "--format", "json").stdout)
    lengths = data["lengths"]
    assert lengths["source"] == "graph inputs" and lengths["batch"] == 4
    assert lengths["top"] <= 48 and lengths["steps"] == 16
    # every step that compiled a new length is known; the others reused a graph
    assert 4 <= lengths["steps_known"] <= 16
    assert data["cost_model"]["calibrated"] and data["cost_model"]["compile_s"] > 0
    ranked = [p["predicted_total"] for p in data["plans"]]
    assert ranked == sorted(ranked)


def test_the_emitted_loader_bounds_the_graphs_and_diff_shows_it(runs) -> None:
    code = runs["code"].read_text()
    assert code.startswith("# lazyscope advise: ") and "from lazyscope.data import" in code
    before, after = report_json(runs["before"]), report_json(runs["after"])
    assert after["steps"] == before["steps"] == 16
    boundaries = json.loads(lazyscope_cmd("advise", str(runs["before"]), "--no-model-changes",
                                          "--format", "json").stdout)["recommended"]["boundaries"]
    # one graph per bucket at most (the first step's may differ by the optimizer's state)
    assert after["distinct_graphs"] <= len(boundaries) + 1
    assert after["compiles"] < before["compiles"]
    # the loader's PadToBuckets told the trace its lengths: however few steps meet each
    # bucket, the pasted code is bucketing, not churn (no finding, check passes)
    meta = json.loads((runs["after"] / "meta.json").read_text())
    assert meta["info"]["declared_buckets"] == boundaries
    assert after["findings"] == [] and [n["kind"] for n in after["notes"]] == ["reuse"]
    check = lazyscope_cmd("check", str(runs["after"]))
    assert check.returncode == 0, check.stdout
    diff = lazyscope_cmd("diff", str(runs["before"]), str(runs["after"]))
    assert diff.returncode == 0, diff.stderr
    line = next(ln for ln in diff.stdout.splitlines() if ln.strip().startswith("compiles"))
    assert str(before["compiles"]) in line and str(after["compiles"]) in line
