"""meta.json's info decoded into RunInfo and Workload: typed, lenient, the program's keys apart."""

from __future__ import annotations

from lazyscope.model import Meta
from lazyscope.model.info import RunInfo, Workload, run_info


def test_known_keys_are_typed_and_the_rest_is_the_programs() -> None:
    info = run_info({"batch": 8, "max_len": 256, "policy": "longest", "buckets": [64, 256],
                     "graph_shapes": False, "eager_mode": True, "declared_buckets": [8, 16],
                     "lr": 0.1, "dataset": "wiki"})
    assert info.workload == Workload(batch=8, max_len=256, policy="longest", buckets=[64, 256])
    assert (info.graph_shapes, info.eager_mode, info.declared_buckets) == (False, True, [8, 16])
    assert info.user == {"lr": 0.1, "dataset": "wiki"}


def test_a_value_of_the_wrong_type_reads_as_not_recorded() -> None:
    info = run_info({"batch": "8", "buckets": [64, "x"], "graph_shapes": "yes", "spmd": 1,
                     "loaders": {"not": "a list"}})
    assert info.workload.batch is None and info.workload.buckets is None
    assert info.graph_shapes is True and info.spmd is False and info.loaders is None


def test_the_longest_length_comes_from_the_first_key_that_holds_one() -> None:
    assert run_info({"max_length": 128, "model_max_length": 512}).workload.max_len == 128
    assert run_info({"max_len": 0, "model_max_length": 512}).workload.max_len == 512
    assert run_info({"max_len": True}).workload.max_len is None


def test_runtime_counts_that_are_no_count_are_dropped_and_named() -> None:
    info = run_info({"runtime_counts": {"CompileTime": 3, "ExecuteTime": -1, "x": "7"}})
    assert info.runtime_counts == {"CompileTime": 3}
    assert info.damaged_counts == {"ExecuteTime": -1, "x": "7"}


def test_notes_are_lines_however_written() -> None:
    assert run_info({"notes": "one line"}).notes == ["one line"]
    assert run_info({"notes": ["a", 2]}).notes == ["a", "2"]
    assert Meta(info={"notes": ["x"]}).program_notes == ["x"]


def test_anything_that_is_no_object_is_nothing_recorded() -> None:
    assert run_info(None) == RunInfo() and run_info([1, 2]) == RunInfo()
