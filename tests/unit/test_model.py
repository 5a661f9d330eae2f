"""The run format: round trip, tolerance to kills and old files, refusal of corruption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyscope.errors import RunDirError
from lazyscope.model import (
    SCHEMA_VERSION,
    Event,
    Meta,
    RunWriter,
    Site,
    Step,
    load_run,
    prepare_run_dir,
)


def _write_run(path: Path, n: int = 3, status: str | None = "ok") -> None:
    writer = RunWriter(path, Meta(target="t", args=["--x", "1"], backend="xla"))
    for i in range(n):
        writer.write_step(Step(index=i, wall_s=0.1 * (i + 1), compile_count=i % 2,
                               graph_hashes=[f"h{i}"] if i % 2 else [],
                               fallback_ops={"aten::nonzero": 1} if i == 2 else {}))
    writer.write_event(Event(kind="compile", step=1, seconds=0.5,
                             site=Site("train.py", 42, "main"), data={"graph_hash": "h1"}))
    if status:
        writer.finish(status)


def test_round_trip(tmp_path: Path) -> None:
    _write_run(tmp_path / "r")
    run = load_run(tmp_path / "r")
    assert run.complete and run.status == "ok"
    assert [s.index for s in run.steps] == [0, 1, 2]
    assert run.steps[1].graph_hashes == ["h1"]
    assert run.steps[2].fallback_ops == {"aten::nonzero": 1}
    assert run.steps[0].wall_s == pytest.approx(0.1)
    assert run.events[0].site == Site("train.py", 42, "main")
    assert run.meta.args == ["--x", "1"]
    assert run.meta.schema_version == SCHEMA_VERSION


def test_steps_are_on_disk_before_finish(tmp_path: Path) -> None:
    """A run killed before finish() keeps its steps and reads as incomplete."""
    _write_run(tmp_path / "r", n=4, status=None)
    run = load_run(tmp_path / "r")
    assert len(run.steps) == 4
    assert not run.complete and run.status == "incomplete"


def test_truncated_last_line_is_dropped_with_warning(tmp_path: Path) -> None:
    _write_run(tmp_path / "r", n=5)
    steps = tmp_path / "r" / "steps.jsonl"
    data = steps.read_bytes()
    steps.write_bytes(data[: len(data) - 40])  # cut mid-line
    run = load_run(tmp_path / "r")
    assert len(run.steps) == 4
    assert any("cut off" in w for w in run.warnings)


def test_missing_keys_take_defaults(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"target": "old"}))
    (d / "steps.jsonl").write_text('{"step": 0}\n{"step": 1, "wall_s": 2.5}\n')
    run = load_run(d)
    assert run.meta.backend == "xla" and run.meta.status == "running"
    assert run.steps[1].wall_s == 2.5 and run.steps[0].compile_count == 0


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    _write_run(tmp_path / "r", n=3)
    steps = tmp_path / "r" / "steps.jsonl"
    lines = steps.read_text().splitlines()
    lines[1] = "{not json"
    steps.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match="line 2"):
        load_run(tmp_path / "r")


def test_wrong_types_are_an_error(tmp_path: Path) -> None:
    _write_run(tmp_path / "r", n=1)
    (tmp_path / "r" / "steps.jsonl").write_text('{"step": 0, "wall_s": "slow"}\n{"step": 1}\n')
    with pytest.raises(RunDirError, match="not a valid step"):
        load_run(tmp_path / "r")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    _write_run(tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    meta["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "r" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(RunDirError, match="newer"):
        load_run(tmp_path / "r")


def test_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no meta.json"):
        load_run(tmp_path)
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(tmp_path / "missing")


def test_prepare_run_dir_refuses_and_replaces(tmp_path: Path) -> None:
    _write_run(tmp_path / "r")
    with pytest.raises(RunDirError, match="--force"):
        prepare_run_dir(tmp_path / "r", force=False)
    assert load_run(tmp_path / "r").steps  # untouched
    prepare_run_dir(tmp_path / "r", force=True)
    assert list((tmp_path / "r").iterdir()) == []


def test_prepare_run_dir_never_deletes_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(RunDirError, match="not a lazyscope run"):
        prepare_run_dir(foreign, force=True)
    assert (foreign / "thesis.tex").read_text() == "precious"
