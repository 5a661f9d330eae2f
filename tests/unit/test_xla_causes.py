"""Which torch_xla.sync() calls end the program's step, and what made XLA compile (pure)."""

from __future__ import annotations

from lazyscope.backends.xla.causes import (
    barrier_source,
    classify_compile,
    closure_kind,
    is_program_barrier,
    library_call,
)
from lazyscope.model import OWNER_LIBRARY, Frame

SP = "/venv/lib/python3.11/site-packages"


def lib(path: str, function: str, line: int = 1) -> Frame:
    return Frame(f"{SP}/{path}", line, function, True)


USER = Frame("/home/me/train.py", 3, "main")
SYNC = lib("torch_xla/torch_xla.py", "sync", 87)
MARK_STEP = lib("torch_xla/core/xla_model.py", "mark_step")
DEPRECATED = lib("typing_extensions.py", "wrapper")
STEP_EXIT = lib("torch_xla/debug/profiler.py", "__exit__")
LOADER = lib("torch_xla/distributed/parallel_loader.py", "next")
COMPILE_END = lib("torch_xla/torch_xla.py", "_compile")
CONTEXTLIB = Frame("/usr/lib/python3.11/contextlib.py", 144, "__exit__", True)
CLEAR = lib("torch_xla/torch_xla.py", "_clear_pending_ops_before_compile")
BRIDGE = lib("torch_xla/_dynamo/dynamo_bridge.py", "extract_compiled_graph")
MESH_REDUCE = lib("torch_xla/core/xla_model.py", "mesh_reduce")
CLOSURES = lib("torch_xla/core/xla_model.py", "_run_step_closures")
ASYNC = lib("torch_xla/utils/closures.py", "event_loop")


def test_the_programs_barriers_are_steps() -> None:
    assert is_program_barrier([USER])  # torch_xla.sync() in the loop
    assert is_program_barrier([MARK_STEP, DEPRECATED, USER])  # xm.mark_step()
    assert is_program_barrier([STEP_EXIT, USER])  # leaving xp.StepTrace
    assert is_program_barrier([LOADER, USER])  # the parallel loader's per-batch barrier
    assert is_program_barrier([COMPILE_END, CONTEXTLIB, USER])  # end of torch_xla.step()
    # a training library calling torch_xla.sync() for the user (Lightning, Accelerate ...)
    assert is_program_barrier([Frame(f"{SP}/lightning/loop.py", 9, "step", True), USER])


def test_torch_xlas_own_syncs_are_not_steps() -> None:
    assert not is_program_barrier([CLEAR, CONTEXTLIB, USER])  # torch_xla.step() start
    assert not is_program_barrier([BRIDGE, USER])  # dynamo bridge (openxla)
    assert not is_program_barrier([MESH_REDUCE, USER])


def test_closures_and_library_calls() -> None:
    assert closure_kind([USER, CLOSURES, SYNC, USER]) == "sync"
    assert closure_kind([USER, ASYNC]) == "async"
    assert closure_kind([USER]) == ""
    assert library_call([MESH_REDUCE, USER]) == "xm.mesh_reduce"
    assert library_call([USER, MESH_REDUCE]) == ""  # the user's own code made it


def test_compile_causes_and_owners() -> None:
    assert classify_compile([SYNC, USER])[:2] == ("barrier", "step barrier: torch_xla.sync()")
    assert classify_compile([SYNC, STEP_EXIT, USER])[1].endswith("StepTrace region")
    assert "parallel loader" in classify_compile([SYNC, LOADER, USER])[1]
    assert "mark_step" in classify_compile([SYNC, MARK_STEP, DEPRECATED, USER])[1]
    assert "torch_xla.step()" in classify_compile([SYNC, COMPILE_END, CONTEXTLIB, USER])[1]
    assert classify_compile([lib("torch/_tensor.py", "item"), USER])[0] == "value_read"
    kind, cause, owner = classify_compile([SYNC, MESH_REDUCE, USER])
    assert kind == "internal" and "mesh_reduce" in cause and owner == OWNER_LIBRARY
    kind, _, owner = classify_compile([SYNC, BRIDGE, USER])  # the user's graph, via dynamo
    assert kind == "dynamo" and owner == "user"
    assert classify_compile([])[0] == "other"


def test_barrier_source_tells_the_loaders_sync_from_the_programs_own() -> None:
    assert barrier_source([LOADER, USER]) == "loader"
    assert barrier_source([STEP_EXIT, USER]) == "steptrace"
    assert barrier_source([COMPILE_END, CONTEXTLIB, USER]) == "own"
    assert barrier_source([MARK_STEP, DEPRECATED, USER]) == "own"
    assert barrier_source([USER]) == "own"


def test_a_read_made_by_a_torch_xla_api_names_the_api() -> None:
    from lazyscope.backends.xla.reads import read_event_data

    rendezvous = lib("torch_xla/core/xla_model.py", "rendezvous")
    helper = lib("torch_xla/core/xla_model.py", "<listcomp>")
    _, payload = read_event_data([helper, rendezvous, USER], ".item()", [])
    assert payload.owner == OWNER_LIBRARY and payload.api == "xm.rendezvous"
    assert payload.read == ".item() by xm.rendezvous"
    _, mine = read_event_data([USER], ".item()", [])
    assert mine.api == "" and mine.read == ".item()"
