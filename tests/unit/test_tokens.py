"""The real tokens a run trained on, measured from its annotations or its loader's batches
(pure: runs written by the test, no XLA)."""

from __future__ import annotations

import pytest

from lazyscope.analyze.parts import start_s, training_s
from lazyscope.analyze.report import build_report
from lazyscope.analyze.tokens import measured_tokens
from tests.builders import build_run


def _loader(real: list[int], padded: list[int], batches: int | None = None) -> dict:
    return {"made_at": [], "collate": {"name": "collate"}, "batches": batches or len(real),
            "varying": {}, "shapes": {},
            "tokens": {"counted_by": "attention_mask", "batches": len(real), "real": sum(real),
                       "padded": sum(padded), "real_per_batch": real,
                       "padded_per_batch": padded}}


def test_the_steps_batches_count_not_those_the_loader_made_ahead(tmp_path) -> None:
    walls = [2.0, 0.5, 0.5, 0.5]
    train = _loader([10, 20, 30, 40, 50, 60], [16, 32, 32, 64, 64, 64])  # 2 made ahead
    small = _loader([5], [8])
    run = build_run(tmp_path / "r", steps=[{"wall_s": w} for w in walls],
                    info={"loaders": [small, train]})
    t = measured_tokens(run)
    assert (t.real, t.padded, t.steps) == (100, 144, 4)
    assert t.seconds == pytest.approx(3.5) and t.per_second == pytest.approx(100 / 3.5)
    assert t.padding_efficiency == pytest.approx(100 / 144)
    assert t.source == "loader batches (attention_mask)"
    s = build_report(run).summary
    assert s.real_tokens == 100 and s.real_tokens_per_second == pytest.approx(100 / 3.5)


def test_annotations_come_first_and_nothing_measured_is_none(tmp_path) -> None:
    annotated = build_run(tmp_path / "a", steps=[{"wall_s": 1.0}] * 2,
                          annotations={0: {"real_tokens": 7, "computed_tokens": 8},
                                       1: {"real_tokens": 5, "computed_tokens": 8}},
                          info={"loaders": [_loader([100, 100], [100, 100])]})
    t = measured_tokens(annotated)
    assert (t.real, t.padded, t.source) == (12, 16, "annotations")
    bare = build_run(tmp_path / "b", steps=[{"wall_s": 1.0}] * 2,
                     info={"loaders": [{"batches": 3, "collate": {}}]})
    assert measured_tokens(bare) is None
    assert build_report(bare).summary.real_tokens is None


def test_throughput_leaves_out_lazyscopes_own_time_and_the_programs_start(tmp_path) -> None:
    """Real tokens/s is the program's training: each step's wall less lazyscope's own
    bookkeeping (``own_s``), and step 0 less its host time before the first barrier (imports,
    building the model: seconds that vary from run to run and that no padding changes)."""
    steps = [{"wall_s": 3.5, "barrier_s": 0.5, "own_s": 0.0},  # 3.0 s of start
             {"wall_s": 0.7, "barrier_s": 0.4, "own_s": 0.2},
             {"wall_s": 0.5, "barrier_s": 0.4, "input_s": 0.05}]
    run = build_run(tmp_path / "r", steps=steps,
                    info={"loaders": [_loader([10, 20, 30], [16, 32, 32])]})
    assert start_s(run) == pytest.approx(3.0)
    assert list(training_s(run)) == pytest.approx([0.5, 0.5, 0.5])
    t = measured_tokens(run)
    assert t.seconds == pytest.approx(1.5) and t.per_second == pytest.approx(60 / 1.5)
    # a run without the intervals (schema 2, a backend that does not time them): the walls
    old = build_run(tmp_path / "o", steps=[{"wall_s": w["wall_s"]} for w in steps],
                    info={"loaders": [_loader([10, 20, 30], [16, 32, 32])]})
    assert start_s(old) == 0.0 and measured_tokens(old).seconds == pytest.approx(4.7)


def test_a_torch_compile_runs_first_compile_stays_in_its_training_time(tmp_path) -> None:
    """Under torch.compile the first graph compiles inside the program's first call (host
    time, not a barrier): the program's start left out of throughput is step 0's host part
    of the anatomy, without that compilation, which a padding policy changes."""
    steps = [{"wall_s": 5.0, "barrier_s": 0.1, "compile_s": 2.0},  # 2.9 s of start
             {"wall_s": 1.5, "barrier_s": 0.1, "compile_s": 1.0},
             {"wall_s": 0.5, "barrier_s": 0.1}]
    run = build_run(tmp_path / "c", backend="torch", steps=steps,
                    info={"loaders": [_loader([10, 20, 30], [16, 32, 32])]})
    assert run.meta.capabilities.lazy is False
    assert start_s(run) == pytest.approx(2.9)
    assert list(training_s(run)) == pytest.approx([2.1, 1.5, 0.5])
    # the same steps on XLA: 0.1 s of the compilation ran inside the barrier, the other
    # 1.9 s outside it (a rare case) are also kept out of the start: 5.0 - 0.1 - 1.9
    lazy = build_run(tmp_path / "x", steps=steps,
                     info={"loaders": [_loader([10, 20, 30], [16, 32, 32])]})
    assert start_s(lazy) == pytest.approx(3.0)
