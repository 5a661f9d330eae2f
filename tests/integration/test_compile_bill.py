"""The compile bill on real torch_xla (CPU): what compiling cost, by line, and the persistent
compilation cache as torch_xla's own counters saw it, in fresh processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.slow, pytest.mark.xla]

SCRIPT = REPO / "tests" / "programs" / "time" / "cached.py"


def _trace(out: Path, *args: str) -> dict:
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(SCRIPT), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return report_json(out)


def test_the_bill_names_the_lines_and_a_missing_cache(tmp_path: Path) -> None:
    rep = _trace(tmp_path / "none")
    bill = rep["compile_bill"]
    assert bill["graphs"] == rep["compilations_total"] >= 1
    assert abs(bill["seconds"] - sum(c["seconds"] for c in rep["compilations"])) < 1e-6
    assert bill["lines"][0]["site"].startswith(str(SCRIPT))
    assert abs(sum(line["share"] for line in bill["lines"]) - 1) < 1e-6
    assert bill["lines"][0]["ops"] and bill["lines"][0]["inputs"]
    cache = bill["cache"]
    assert cache["configured"] is False and "initialize_cache" in cache["verdict"]
    text = lazyscope_cmd("report", str(tmp_path / "none")).stdout
    assert "compile bill    the first step took" in text


def test_a_cache_filled_then_read_back_is_said_with_torch_xlas_counters(tmp_path: Path) -> None:
    """The first run finds the directory empty: every graph a miss, and the next run should
    hit. XLA:CPU writes its entries but cannot load them back: the second run's loads fail,
    which torch_xla counts, and the bill says so."""
    cache = tmp_path / "xla-cache"
    first = _trace(tmp_path / "first", str(cache))["compile_bill"]["cache"]
    assert first["configured"] and first["path"] == str(cache)
    assert first["misses"] >= 1 and first["hits"] == 0 and not first["entries_before"]
    assert "was empty when the program started" in first["verdict"]
    second = _trace(tmp_path / "second", str(cache))["compile_bill"]["cache"]
    assert second["entries_before"] >= 1
    print(first, second)
    if second["failed_loads"]:
        assert "failed to load" in second["verdict"]
    else:  # a torch_xla that reads its CPU entries back
        assert second["hits"] >= 1
