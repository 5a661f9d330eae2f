"""The run format (schema 2): round trip of typed events, absent fields, interning, tolerance to
kills and old files, refusal of corruption."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from lazyscope.core.errors import OutputError, RunDirError
from lazyscope.model import (
    SCHEMA_VERSION,
    Change,
    Compile,
    Fallback,
    FallbackExec,
    GraphBreak,
    GraphInput,
    Sync,
)
from lazyscope.store import RunWriter, check_run_dir, load_run, load_target, prepare_run_dir
from lazyscope.store.layout import EVENTS_FILE, INTERN_FILE, STEPS_FILE
from tests.builders import build_run, frame

DATA = Path(__file__).resolve().parents[1] / "data"
USER = frame("/work/train.py", 42, "main")
LIB = frame("/site-packages/torch_xla/torch_xla.py", 87, "sync", library=True)


def _steps(n: int) -> list[dict]:
    return [{"wall_s": 0.1 * (i + 1), "compile_count": i % 2, "compile_s": 0.5 * (i % 2),
             "execute_count": 1, "from_device_count": 0} for i in range(n)]


def test_round_trip_of_typed_events(tmp_path: Path) -> None:
    compile_ = Compile(cause="step barrier", cause_kind="barrier",
                       inputs=[GraphInput("f32", [4, 17, 32], origin=frame("/work/train.py", 17))],
                       ops={"dot": 2}, digest="abc",
                       changes=[Change("x", "dim", 1, 8, 17)])
    run = build_run(tmp_path / "r", steps=_steps(3), events=[
        {"kind": "compile", "step": 1, "seconds": 0.5, "stack": (LIB, USER), "payload": compile_,
         "key": "h1"},
        {"kind": "sync", "step": 2, "seconds": 0.01, "stack": (USER,),
         "payload": Sync(read=".item()", shape=[]), "value": 1},
        {"kind": "fallback_exec", "step": 2, "payload": FallbackExec("aten::nonzero"),
         "value": 3},
        {"kind": "graph_break", "step": 0, "stack": (USER,),
         "payload": GraphBreak("Unsupported builtin", hints=["use torch.where"])},
    ])
    assert run.complete and run.status == "ok" and run.meta.schema_version == SCHEMA_VERSION
    assert len(run.steps) == 3 and run.steps[0].wall_s == pytest.approx(0.1)
    assert run.steps[1].compile_count == 1 and run.steps[2].execute_count == 1
    events = list(run.events.iter())
    assert [e.kind for e in events] == ["compile", "sync", "fallback_exec", "graph_break"]
    e = events[0]
    assert e.key == "h1" and e.step == 1 and e.stack == (LIB, USER) and e.site == USER
    assert e.data.inputs[0].shape == [4, 17, 32] and e.data.inputs[0].origin.line == 17
    assert e.data.changes[0].to_json()["after"] == 17
    assert events[1].data.read == ".item()" and events[1].value == 1
    assert events[2].data.op == "aten::nonzero" and events[2].value == 3
    assert events[3].data.hints == ["use torch.where"]


def test_a_fallback_and_its_execution_count_with_the_same_json_keep_their_kinds(
        tmp_path: Path) -> None:
    # Fallback("aten::histc") and FallbackExec("aten::histc") encode to the same JSON
    run = build_run(tmp_path / "r", steps=_steps(2), events=[
        {"kind": "fallback", "step": 1, "stack": (USER,), "payload": Fallback("aten::histc"),
         "value": 1},
        {"kind": "fallback_exec", "step": 1, "payload": FallbackExec("aten::histc"), "value": 1},
    ])
    kinds = [(e.kind, type(e.data).__name__) for e in run.events.iter()]
    assert kinds == [("fallback", "Fallback"), ("fallback_exec", "FallbackExec")]
    assert next(run.events.iter()).data.via == ""


def test_a_field_the_backend_does_not_measure_is_none_not_zero(tmp_path: Path) -> None:
    run = build_run(tmp_path / "r", backend="compile", steps=_steps(2))
    assert run.steps.col("execute_count") is None and run.steps.col("wall_s") is not None
    step = run.steps[0]
    assert step.execute_count is None and step.from_device_count is None
    assert step.wall_s == pytest.approx(0.1)
    assert run.steps.total("execute_count") is None and run.steps.total("wall_s") > 0


def test_stacks_and_payloads_are_stored_once(tmp_path: Path) -> None:
    events = [{"kind": "sync", "step": i, "stack": (USER,), "payload": Sync(read=".item()"),
               "value": 1} for i in range(500)]
    run = build_run(tmp_path / "r", steps=_steps(500), events=events)
    lines = (tmp_path / "r" / INTERN_FILE).read_text().splitlines()
    assert len(lines) == 3  # one frame, one stack, one payload
    assert len(run.events) == 500 and len(np.unique(run.events.stack)) == 1


def test_steps_are_on_disk_before_finish(tmp_path: Path) -> None:
    """A run killed before finish() keeps its steps and reads as incomplete."""
    from lazyscope.model import Meta

    writer = RunWriter(tmp_path / "r", Meta(target="t"))
    for i in range(4):
        writer.write_step(i, {"wall_s": 0.1})
    writer.write_event("sync", 3, stack=(USER,), payload=Sync(read=".item()"))
    run = load_run(tmp_path / "r")  # still NUL-padded: never closed
    assert len(run.steps) == 4 and len(run.events) == 1
    assert not run.complete and run.status == "incomplete"


def test_a_cut_last_record_is_dropped_with_a_warning(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(5))
    steps = tmp_path / "r" / STEPS_FILE
    data = steps.read_bytes()
    steps.write_bytes(data[: len(data) - 40])
    run = load_run(tmp_path / "r")
    assert len(run.steps) == 4 and any("cut off" in w for w in run.warnings)


def test_an_empty_record_in_the_middle_is_corruption(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(3))
    steps = tmp_path / "r" / STEPS_FILE
    data = bytearray(steps.read_bytes())
    data[120:240] = bytes(120)
    steps.write_bytes(bytes(data))
    with pytest.raises(RunDirError, match="corrupt"):
        load_run(tmp_path / "r")


def test_a_dangling_intern_reference_is_corruption(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1), events=[
        {"kind": "sync", "stack": (USER,), "payload": Sync(read="x")}])
    (tmp_path / "r" / INTERN_FILE).write_text('{"f": ["a", 1, "f", false]}\n')
    with pytest.raises(RunDirError, match="refers to entry"):
        load_run(tmp_path / "r")


def test_a_bad_intern_line_is_corruption_when_used(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1), events=[
        {"kind": "sync", "stack": (USER,), "payload": Sync(read="x")}])
    path = tmp_path / "r" / INTERN_FILE
    lines = path.read_text().splitlines()
    lines[-1] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path / "r")
    with pytest.raises(RunDirError, match="not a valid entry"):
        list(run.events.iter())


def test_an_unknown_event_kind_in_this_schema_is_corruption(tmp_path: Path) -> None:
    """A newer lazyscope that adds event kinds writes a newer schema (refused with "upgrade",
    below); in a run of this schema an unknown kind is damage, not news."""
    build_run(tmp_path / "r", steps=_steps(1), events=[{"kind": "sync", "payload": Sync()}])
    path = tmp_path / "r" / EVENTS_FILE
    data = bytearray(path.read_bytes())
    data[0] = 200
    path.write_bytes(bytes(data))
    with pytest.raises(RunDirError, match=r"events\.bin has 1 record of no known kind "
                                          r"\(kind 200\): the run file is corrupt"):
        load_run(tmp_path / "r")


@pytest.mark.parametrize("bad, said", [
    ([-1.0], "events.bin: 1 duration that is not a time (the file is damaged); it counts as 0"),
    ([-1.0, float("nan")], "events.bin: 2 durations that are not times (the file is damaged); "
                           "they count as 0")])
def test_an_event_duration_that_is_not_a_time_is_said_and_counts_as_0(
        tmp_path: Path, bad: list[float], said: str) -> None:
    build_run(tmp_path / "r", steps=_steps(1), events=[
        {"kind": "sync", "payload": Sync(read="x")} for _ in range(2)])
    path = tmp_path / "r" / EVENTS_FILE
    data = bytearray(path.read_bytes())
    for i, seconds in enumerate(bad):  # the record's seconds: offset 16 of its 40 bytes
        struct.pack_into("<d", data, 40 * i + 16, seconds)
    path.write_bytes(bytes(data))
    run = load_run(tmp_path / "r")
    assert said in run.warnings
    assert [e.seconds for e in run.events.iter()] == [0.0] * len(bad) + [0.0] * (2 - len(bad))


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
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


@pytest.mark.parametrize("name", ["dynamic20", "static20", "decoder_longest6"])
def test_schema_1_runs_still_load(tmp_path: Path, name: str) -> None:
    shutil.copytree(DATA / "v1" / name, tmp_path / name)
    run = load_run(tmp_path / name)
    assert run.meta.schema_version == 1 and run.status == "ok"
    assert len(run.steps) in (6, 20)
    compiles = list(run.events.iter("compile"))
    assert compiles and all(e.data.phase == "graph" for e in compiles)
    # schema 1 recorded a fixed warm-up of 2; schema 2 finds warm-up itself
    assert run.meta.warmup_steps is None
    # lazyscope's own frames recorded by another checkout are library code
    assert all("/lazyscope/backends/" not in str(e.site) for e in compiles)


def test_prepare_run_dir_refuses_and_replaces(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
    with pytest.raises(RunDirError, match="--force"):
        prepare_run_dir(tmp_path / "r", force=False)
    assert len(load_run(tmp_path / "r").steps) == 1  # untouched
    rd = prepare_run_dir(tmp_path / "r", force=True)
    # empty but for the lock this process now holds on it
    assert [p.name for p in (tmp_path / "r").iterdir()] == [".lock"]
    rd.close()


def test_check_run_dir_decides_without_touching_anything(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
    assert check_run_dir(tmp_path / "r", force=True) is True  # would replace it ...
    assert len(load_run(tmp_path / "r").steps) == 1  # ... but has not
    assert check_run_dir(tmp_path / "new" / "deep", force=False) is False
    assert not (tmp_path / "new").exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        check_run_dir(tmp_path / "f", force=True)
    with pytest.raises(OutputError, match="a part of the path is not a directory"):
        check_run_dir(tmp_path / "f" / "run", force=False)


def test_prepare_run_dir_never_deletes_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(RunDirError, match="not a lazyscope run"):
        prepare_run_dir(foreign, force=True)
    assert (foreign / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("meta", ['{"title": "my notes"}', "not json at all", "[1, 2]",
                                  '{"schema_version": "2", "backend": "xla"}'])
def test_force_never_deletes_a_directory_whose_meta_json_is_not_lazyscopes(
        tmp_path: Path, meta: str) -> None:
    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "meta.json").write_text(meta)
    (foreign / "data.csv").write_text("precious")
    with pytest.raises(RunDirError, match="not a lazyscope run"):
        prepare_run_dir(foreign, force=True)
    assert (foreign / "data.csv").read_text() == "precious"


def test_force_never_deletes_the_current_directory(tmp_path: Path, monkeypatch) -> None:
    build_run(tmp_path / "r", steps=_steps(1))
    (tmp_path / "r" / "sub").mkdir()
    for cwd in (tmp_path / "r", tmp_path / "r" / "sub"):
        monkeypatch.chdir(cwd)
        with pytest.raises(RunDirError, match="holds the current directory"):
            prepare_run_dir(tmp_path / "r", force=True)
        assert len(load_run(tmp_path / "r").steps) == 1


def test_replacing_leaves_no_old_copy_behind(tmp_path: Path) -> None:
    build_run(tmp_path / "r", steps=_steps(2))
    prepare_run_dir(tmp_path / "r", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_missing_parent_behind_a_dangling_link_is_named(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RunDirError, match="dangling is a symbolic link to .*nowhere, which "
                                          "does not exist"):
        prepare_run_dir(tmp_path / "dangling" / "run", force=False)


def test_a_directory_of_ranks_loads_as_one_multi_process_run(tmp_path: Path) -> None:
    for rank in (0, 1):
        build_run(tmp_path / "run" / f"rank{rank}", steps=_steps(3))
    ranked = load_target(tmp_path / "run")
    assert sorted(ranked.ranks) == [0, 1] and ranked.parent is None
