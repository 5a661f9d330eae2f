"""Memory in the padding advice on a real XLA:CPU run (issue 32, item 5): a pad-to-longest
loop through self-attention (graph bytes grow with L^2), traced in a fresh process; `advise`
predicts each policy's largest graph from the run's own graphs and `--device-memory` rules out
those that would not fit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, trace_all

pytestmark = [pytest.mark.xla]

SCRIPT = REPO / "tests" / "programs" / "memory" / "attention.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    return trace_all(tmp_path_factory.mktemp("advise-memory"), {"attention": SCRIPT})["attention"]


def _advise(run_dir: Path, *args: str) -> dict:
    proc = lazyscope_cmd("advise", str(run_dir), *args, "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_the_memory_model_is_the_runs_own_graphs(run) -> None:
    run_dir, report = run
    data = _advise(run_dir)
    model = data["memory"]
    assert model["form"] == "quadratic" and model["rows"] == 4
    assert model["lengths"] == [40, 64, 80, 96]  # the batch lengths the program pads to
    # each length's bytes: the largest graph XLA analysed at the step site for that bucket
    site = model["site"]
    assert site.endswith("attention.py:21")
    by_length: dict[int, int] = {}
    for g in report["memory"]["graphs"]:
        if g["site"] == site and "f32[4," in g["shape"]:
            n = int(g["shape"].split("f32[4,")[1].split(",")[0])
            by_length[n] = max(by_length.get(n, 0), g["total"])
    assert [by_length[n] for n in model["lengths"]] == model["graph_bytes"]
    # pad to longest's largest graph is the run's own peak graph
    longest = next(p for p in data["plans"] if p["kind"] == "longest")
    assert longest["predicted_graph_memory"] == report["memory"]["peak"]["total"]
    assert "device_memory" not in data and "ruled_out" not in data


def test_device_memory_rules_out_the_policies_that_do_not_fit(run) -> None:
    run_dir, report = run
    peak = report["memory"]["peak"]["total"]  # ~795 KiB: the padded batches fit in 1 MB
    assert peak < 10**6
    data = _advise(run_dir, "--device-memory", "1MB")
    assert data["device_memory"] == 10**6
    ruled = {p["policy"]: p["predicted_graph_memory"] for p in data["ruled_out"]}
    # packed rows twice and four times as long: the L^2 scores no longer fit
    assert set(ruled) == {"packed:2x192", "packed:1x384"}
    assert all(b > 10**6 for b in ruled.values())
    assert all(p["fits"] is True and p["predicted_graph_memory"] <= 10**6
               for p in data["plans"])
    assert data["recommended"]["policy"] not in ruled
    text = lazyscope_cmd("advise", str(run_dir), "--device-memory", "1MB")
    assert text.returncode == 0, text.stderr
    # the size as given, and as the report says sizes
    assert "device memory: 1 MB (976.6 KiB) (1,000,000 bytes, --device-memory): 2 policies " \
        "ruled out" in text.stdout
    assert re.search(r"packed 2x192 +largest batch 2x192: graph 1\.5 MiB > 1 MB \(976\.6 KiB\)",
                     text.stdout)
    emit = lazyscope_cmd("advise", str(run_dir), "--device-memory", "1MB", "--emit")
    assert emit.returncode == 0, emit.stderr
    assert "fits 1 MB (976.6 KiB)" in emit.stdout.splitlines()[0]
    assert "192" not in emit.stdout and "384" not in emit.stdout
    # a generous device: nothing ruled out, the same ranking as without one
    roomy = _advise(run_dir, "--device-memory", "1GB")
    assert "ruled_out" not in roomy
    assert [p["policy"] for p in roomy["plans"]] == [p["policy"] for p in _advise(run_dir)["plans"]]
    # a device smaller than any policy's largest graph: nothing to recommend, exit 2
    none = lazyscope_cmd("advise", str(run_dir), "--device-memory", "100KB")
    assert none.returncode == 2
    assert "no policy fits in 97.7 KiB of device memory" in none.stderr
    bad = lazyscope_cmd("advise", str(run_dir), "--device-memory", "lots")
    assert bad.returncode == 2 and "--device-memory: 'lots' is not a size" in bad.stderr
