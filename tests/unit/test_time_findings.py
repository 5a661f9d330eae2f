"""The step anatomy and the findings that follow from it, on runs written by lazyscope's own
writer (pure logic: no torch_xla). The real programs are in
tests/integration/test_step_anatomy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyscope.analyze.anatomy import anatomy_line
from lazyscope.analyze.bound import _workers_needed
from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.report import build_report
from tests.builders import build_run

TRAIN = "/home/me/train.py"


def step(wall: float, *, input_s: float = 0.0, barrier: float = 0.0, sync: float = 0.0,
         own: float = 0.0, compile_s: float = 0.0, execute: float = 0.0) -> dict:
    return {"wall_s": wall, "t_end_s": 0.0, "compile_count": 1 if compile_s else 0,
            "compile_s": compile_s, "execute_count": 1, "execute_s": execute,
            "to_device_count": 0, "to_device_bytes": 0, "to_device_s": 0.0,
            "from_device_count": 0, "from_device_bytes": 0, "from_device_s": 0.0,
            "fallback_count": 0, "input_s": input_s, "barrier_s": barrier, "sync_s": sync,
            "own_s": own}


def loader(made_at: list[list], **settings) -> dict:
    return {"made_at": made_at, "collate": {}, "batches": 10, "varying": {}, "shapes": {},
            "waited_s": 0.5, **settings}


USER_LOADER = [[TRAIN, 12, "<module>", False]]
SAMPLES = {"hz": 100, "total": 100, "phases": {"input": 80, "host": 20},
           "lines": [["input", TRAIN, 5, "__getitem__", 78, "time.sleep"],
                     ["host", TRAIN, 20, "<module>", 20, "torch.nn.modules.module._call"]]}


def test_parts_sum_to_the_wall_and_compile_is_taken_where_it_ran(tmp_path: Path) -> None:
    """XLA (lazy): a compilation runs in the barrier, so it comes out of the barrier's time;
    the host is the rest of the wall, every part sums to the wall."""
    steps = [step(2.0, barrier=1.6, compile_s=1.5, input_s=0.1)] + \
        [step(0.1, input_s=0.02, barrier=0.05, sync=0.01, own=0.001, execute=0.04)] * 6
    rep = build_report(build_run(tmp_path / "r", steps=steps))
    a = rep.anatomy
    assert a is not None and a.host_label == "tracing"
    first = {k: float(v[0]) for k, v in a.per_step.items()}
    assert first["compile"] == pytest.approx(1.5) and first["device"] == pytest.approx(0.1)
    assert sum(first.values()) == pytest.approx(2.0)
    s = a.steady
    assert s.wall_s == pytest.approx(0.1) and s.host_s == pytest.approx(0.019)
    assert anatomy_line(a).startswith("device 50% · input 20% · tracing 19%")


def test_a_loop_waiting_for_its_data_is_input_bound_at_the_loader(tmp_path: Path) -> None:
    steps = [step(1.0, compile_s=0.9, barrier=0.95)] + \
        [step(0.1, input_s=0.08, barrier=0.01, execute=0.01)] * 8
    info = {"loaders": [loader(USER_LOADER, num_workers=0, pin_memory=False,
                               dataset="Slow", sample_at=[TRAIN, 4, "__getitem__"])],
            "samples": SAMPLES}
    rep = build_report(build_run(tmp_path / "r", steps=steps, info=info))
    (f,) = [f for f in rep.findings if f.kind == "input_bound"]
    assert (f.file, f.line) == (TRAIN, 12)
    assert f"{TRAIN}:5 (__getitem__) 98%" in f.detail  # 78 of the 80 input samples
    assert "num_workers=5" in f.fix and "MpDeviceLoader" in f.fix  # 80 ms / 20 ms, + 1
    assert rep.verdict.startswith("input-bound: the loop waits for its data 80% of each step")
    assert not check_report(rep, Rules(max_input_share=0.1)).passed
    assert check_report(rep, Rules(max_input_share=0.9)).passed


def test_a_trainers_loader_is_fixed_in_its_training_arguments(tmp_path: Path) -> None:
    """A loader made inside transformers: the line is the program's TrainingArguments(...)
    call, the fix its dataloader_num_workers."""
    script = tmp_path / "train_hf.py"
    script.write_text("from transformers import TrainingArguments, Trainer\n"
                      "args = TrainingArguments(output_dir='o',\n"
                      "                         per_device_train_batch_size=4)\n"
                      "Trainer(model=None, args=args).train()\n")
    made = [["/sp/transformers/trainer.py", 928, "get_train_dataloader", True],
            [str(script), 4, "<module>", False]]
    steps = [step(1.0, compile_s=0.9, barrier=0.95)] + \
        [step(0.1, input_s=0.06, barrier=0.03, execute=0.03)] * 8
    info = {"loaders": [loader(made, num_workers=0)],
            "sources": {"labels": {}, "lines": {str(script): {"4": "Trainer(...).train()"}}}}
    from lazyscope.model.source_files import SOURCES

    rep = build_report(build_run(tmp_path / "r", steps=steps, info=info), sources=SOURCES)
    (f,) = [f for f in rep.findings if f.kind == "input_bound"]
    assert (f.file, f.line) == (str(script), 2)
    assert "dataloader_num_workers=" in f.fix and "MpDeviceLoader" not in f.fix


def test_tracing_longer_than_the_device_is_host_bound_at_the_sampled_line(
        tmp_path: Path) -> None:
    samples = {"hz": 100, "total": 100, "phases": {"host": 100},
               "lines": [["host", TRAIN, 30, "<module>", 70, "torch.optim.adamw.step"],
                         ["host", TRAIN, 28, "<module>", 30, "torch._tensor.backward"]]}
    steps = [step(1.0, compile_s=0.9, barrier=0.95)] + \
        [step(0.4, barrier=0.01, execute=0.01)] * 8
    rep = build_report(build_run(tmp_path / "r", steps=steps, info={"samples": samples}))
    (f,) = rep.findings
    assert (f.kind, f.line) == ("host_bound", 30)
    assert 'torch.compile(opt.step, backend="openxla")' in f.fix
    assert rep.verdict.startswith("host-bound: tracing")
    # a small model's tracing tax is no finding
    small = [step(1.0, compile_s=0.9, barrier=0.95)] + [step(0.04, barrier=0.01)] * 8
    assert build_report(build_run(tmp_path / "s", steps=small)).findings == []


def test_time_is_not_judged_without_steady_steps(tmp_path: Path) -> None:
    """Every step compiled: the steps averaged are the program's start and its compilations,
    not a host's share of a step."""
    steps = [step(1.0, compile_s=0.2, barrier=0.25)] * 4
    rep = build_report(build_run(tmp_path / "r", steps=steps))
    assert rep.anatomy is not None and rep.anatomy.basis == "all"
    assert [f for f in rep.findings if f.kind == "host_bound"] == []


@pytest.mark.parametrize(("wait", "rest", "have", "want"), [
    (0.088, 0.0113, 0, 9),   # a batch in the loop's thread takes 88 ms, the rest 11.3 ms
    (0.01, 0.1, 0, 2),       # at least 2
    (0.005, 0.01, 4, 7),     # 4 workers still keep the loop waiting: each batch 60 ms
    (1.0, 0.0, 0, 16),       # no time left in the step: the most
])
def test_workers_are_sized_from_the_measured_batch_time(wait, rest, have, want) -> None:
    assert _workers_needed(wait, rest, have) == want


def test_a_run_recorded_before_the_intervals_has_no_anatomy(data_run) -> None:
    from lazyscope.store import load_run

    rep = build_report(load_run(data_run("static20")))
    assert rep.anatomy is None and not any(f.kind.endswith("_bound") for f in rep.findings)
