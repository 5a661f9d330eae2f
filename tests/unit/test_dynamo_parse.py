"""The pure helpers of lazyscope.backends.dynamo on records shaped like torch 2.9's."""

from __future__ import annotations

import traceback

from lazyscope.analyze.events import event_cause, event_groups
from lazyscope.backends.dynamo import (
    compile_event_data,
    compile_seconds,
    frames_from_summary,
    is_frame_compile,
    parse_guard_failure,
)
from lazyscope.model import Event, Meta, Run, Site

# captured from torch 2.9.0 CompilationMetrics (tiny model, lengths 8 then 11)
RECOMPILE = {
    "compile_id": "0/1", "co_name": "forward", "co_filename": "/tmp/w5/exp.py",
    "co_firstlineno": 17, "recompile_reason": "0/0: tensor 'x' size mismatch at index 1. "
    "expected 8, actual 11", "num_graph_breaks": 0, "duration_us": 8023696,
    "entire_frame_compile_time_s": 8.023696, "fail_type": None, "has_guarded_code": True,
    "cache_size": 1, "is_forward": True,
}


def test_guard_failure_names_the_varying_dimension() -> None:
    parsed = parse_guard_failure("0/0: tensor 'x' size mismatch at index 1. expected 64, actual 97")
    assert parsed == {"tensor": "x", "what": "size", "index": 1, "expected": 64, "actual": 97,
                      "failed_entry": "0/0"}
    stride = parse_guard_failure("tensor 'L['x']' stride mismatch at index 0. expected 16, actual 32")
    assert stride is not None and stride["what"] == "stride" and stride["index"] == 0
    assert parse_guard_failure("0/0: ___check_obj_id(L['self'], 1234)") is None
    assert parse_guard_failure(None) is None and parse_guard_failure("") is None


def test_recompile_record_becomes_event_data() -> None:
    data = compile_event_data(RECOMPILE)
    assert data["cause_kind"] == "recompile"
    assert data["varying"]["index"] == 1 and data["varying"]["actual"] == 11
    assert data["cause"].startswith("recompiling forward: guard failed: 0/0: tensor 'x' size")
    assert data["code"] == "/tmp/w5/exp.py:17" and data["compile_id"] == "0/1"
    assert compile_seconds(RECOMPILE) == 8.023696
    assert is_frame_compile(RECOMPILE)


def test_first_compile_backward_and_legacy_duration() -> None:
    first = {**RECOMPILE, "recompile_reason": None, "compile_id": "0/0"}
    assert compile_event_data(first)["cause_kind"] == "first"
    assert compile_event_data(first)["varying"] is None
    backward = {**RECOMPILE, "is_forward": False}
    assert not is_frame_compile(backward)
    assert compile_event_data(backward)["cause_kind"] == "backward"
    legacy = {"entire_frame_compile_time_s": 2.5}
    assert compile_seconds(legacy) == 2.5 and compile_seconds({}) == 0.0
    failed = {**RECOMPILE, "fail_type": "Unsupported", "fail_reason": "boom"}
    assert compile_event_data(failed)["fail_reason"] == "boom"


def test_frames_from_summary_innermost_first() -> None:
    def inner():
        return traceback.extract_stack()

    sites = frames_from_summary(inner())
    assert sites[0].function == "inner" and sites[1].function.startswith("test_frames")
    assert frames_from_summary(None) == []


def test_event_groups_and_causes(tmp_path) -> None:
    site = Site("/u/train.py", 12, "forward")
    events = [
        Event("compile", 0, 1.0, site, data=compile_event_data({**RECOMPILE,
                                                                "recompile_reason": None})),
        Event("compile", 1, 2.0, site, data=compile_event_data(RECOMPILE)),
        Event("graph_break", 0, site=site, data={"reason": "Tensor.item\nmore"}),
        Event("graph_break", 1, site=site, data={"reason": "Tensor.item\nmore"}),
        Event("sync", 3, site=Site("/u/train.py", 30), data={"message": "called a synchronizing "
                                                               "CUDA operation"}),
        Event("fallback", 3, site=site, data={"op": "aten::nonzero"}),
    ]
    run = Run(path=tmp_path, meta=Meta(), steps=[], events=events)
    groups = event_groups(run)
    assert [(g["kind"], g["count"]) for g in groups] == [
        ("compile", 1), ("compile", 1), ("graph_break", 2), ("sync", 1)]
    assert groups[2]["cause"] == "Tensor.item" and groups[2]["steps"] == [0, 1]
    assert event_cause(events[1]).startswith("guard failed: 0/0: tensor 'x' size mismatch")


def test_sync_warnings_become_sync_events_at_the_user_line() -> None:
    """The warning -> event translation of the CUDA sync debug mode (the warning itself is issued
    here by hand: this machine has no CUDA device to issue it)."""
    import warnings

    from lazyscope.backends.base import Recorder
    from lazyscope.backends.torch_backend import SYNC_WARNING, EagerBackend

    backend = EagerBackend()
    backend._recorder = Recorder(None)
    saved = backend._capture_sync_warnings()
    try:
        warnings.warn(f"{SYNC_WARNING} (item)", UserWarning, stacklevel=1)  # the sync line
        with warnings.catch_warnings(record=True) as other:
            warnings.simplefilter("always")
            warnings.warn("unrelated", UserWarning, stacklevel=1)
    finally:
        saved.__exit__(None, None, None)
    assert len(backend._pending_syncs) == 1
    event = backend._pending_syncs[0]
    assert event.kind == "sync" and SYNC_WARNING in event.data["message"]
    assert event.site is not None and event.site.file == __file__
    source = open(__file__).read().splitlines()
    assert "# the sync line" in source[event.site.line - 1]
    assert [str(w.message) for w in other] == ["unrelated"]
