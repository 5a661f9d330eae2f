"""What a user reads first, said as they would say it: a memory finding's header gives its
bytes (not ``x1, ~0 us``), a size given as ``100MB`` is echoed as given (and in binary units),
``check --help`` prints ``80%`` (click does no %-formatting: ``%%`` would be printed as is)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.findings import AliasFacts, DivergenceFacts, Finding, GrowthFacts
from lazyscope.analyze.report import build_report
from lazyscope.cli import cli
from lazyscope.core.numbers import parse_size
from lazyscope.core.units import size_given
from lazyscope.model import Compile, SourceMap
from lazyscope.model.payloads import GraphMemory
from lazyscope.model.steps import STEP_FIELDS
from lazyscope.render.check import render_check_text
from lazyscope.render.text import finding_lines
from tests.builders import build_run, frame


def _finding(kind: str, facts, count: int = 1, seconds: float = 0.0) -> Finding:
    return Finding(kind, "/u/train.py", 12, "main", [], count, [3], 1, seconds, "detail",
                   "the fix", facts)


def test_memory_findings_are_headed_by_their_bytes() -> None:
    alias = _finding("lost_aliasing", AliasFacts(
        graph="g", compiled_at=None, updated_bytes=8 << 20, lost_bytes=4 << 20,
        aliased_bytes=0, outputs_bytes=8 << 20, inputs=[0], arrays="f32[1024,1024]"))
    growth = _finding("growing_memory", GrowthFacts(
        compiled_at=None, graphs=5, first_bytes=1 << 20, last_bytes=9 << 20,
        per_graph_bytes=2 << 20), count=4)
    missing = _finding("divergence", DivergenceFacts(host=2, diverges="missing"))
    slow = _finding("sync", None, count=30, seconds=1.2)
    heads = [finding_lines(f, SourceMap())[0] for f in (alias, growth, missing, slow)]
    assert heads == [
        "  1. [lost_aliasing] /u/train.py:12, 4.0 MiB held twice (1 array)",
        "  1. [growing_memory] /u/train.py:12, 1.0 MiB -> 9.0 MiB over 5 graphs",
        "  1. [divergence] /u/train.py:12",
        "  1. [sync] /u/train.py:12 x30, ~1.20 s"]
    assert not any("~0 us" in h for h in heads)


def test_a_size_is_echoed_as_given() -> None:
    assert size_given(parse_size("100MB")) == "100 MB (95.4 MiB)"
    assert size_given(parse_size("1GB")) == "1 GB (953.7 MiB)"
    assert size_given(parse_size("16GiB")) == "16.0 GiB"
    assert size_given(parse_size("512K")) == "512.0 KiB"
    assert size_given(1500) == "1.5 KiB"


def test_check_says_the_graph_memory_limit_as_given(tmp_path: Path) -> None:
    big = GraphMemory(inputs=60 << 20, outputs=60 << 20)
    step = {**dict.fromkeys(STEP_FIELDS, 0.0), "wall_s": 0.1, "compile_count": 1}
    run = build_run(tmp_path / "r", steps=[step], events=[
        {"kind": "compile", "stack": (frame("/u/t.py", 10, "f"),),
         "payload": Compile(memory=big, digest="g"), "key": "g"}])
    report = build_report(run)
    over = render_check_text(check_report(report, Rules(max_graph_memory=parse_size("100MB"))))
    assert "FAIL max-graph-memory: 1 site compiled a graph holding more than 100 MB (95.4 MiB) " \
        "(largest 120.0 MiB at /u/t.py:10)" in over, over
    under = render_check_text(check_report(report, Rules(max_graph_memory=parse_size("1GB"))))
    assert "ok   max-graph-memory: no compiled graph holds more than 1 GB (953.7 MiB)" in under, \
        under


def test_check_help_prints_a_percent_sign() -> None:
    out = CliRunner().invoke(cli, ["check", "--help"], terminal_width=200).output
    assert "or 80% of the device" in out and "%%" not in out
