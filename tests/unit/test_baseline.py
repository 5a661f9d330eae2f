"""``check --baseline``'s rules on runs built in memory: the step-time bound from both runs'
spread, compilations, host syncs and executions per step, the CPU time per step from the host
clock's samples, and a wall-clock slowdown on a loaded machine."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from lazyscope.analyze.baseline import (
    DEFAULT_TOLERANCE,
    compare_to_baseline,
    cpu_stats,
    others_load,
    step_stats,
)
from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.report import build_report
from lazyscope.model.codec import encode
from lazyscope.model.steps import STEP_FIELDS
from lazyscope.render.check import render_check_text
from tests.builders import build_run


def make(path: Path, walls: list[float], *, compiles: int = 1, syncs_every: int = 0,
         cpu: list[float] | None = None, others: float | None = None, executions: int = 1):
    """A run of these wall times per step; ``cpu``: its CPU seconds per step (a host clock
    sampled at every barrier on a 2-CPU machine, other processes using ``others`` of it)."""
    steps = [{**dict.fromkeys(STEP_FIELDS, 0.0), "wall_s": w, "compile_count": compiles if i == 0 else 0,
              "compile_s": 0.01 if i == 0 else 0.0, "execute_count": executions,
              "to_device_count": 0,
              "from_device_count": 1 if syncs_every and i % syncs_every == 0 else 0}
             for i, w in enumerate(walls)]
    info = {}
    if cpu is not None:
        samples, c, busy, t = [[0, 0.0, 0.0, 0.0]], 0.0, 0.0, 0.0
        for i, (w, used) in enumerate(zip(walls, cpu, strict=True), 1):
            c, t = c + used, t + w
            busy += used + (others or 0.0) * w * 2
            samples.append([i, c, busy if others is not None else None, t])
        info = {"host_clock": {"cpus": 2, "samples": samples}}
    return build_report(build_run(path, steps=steps, info=info))


def noisy(mean: float, n: int = 40, seed: int = 0, spread: float = 0.002) -> list[float]:
    rng = np.random.default_rng(seed)
    return [0.5] + list(mean + rng.uniform(-spread, spread, n - 1))


def rules_broken(run, base) -> list[str]:
    return [r.rule for r in compare_to_baseline(run, base).regressions]


def test_a_rerun_passes_and_twice_the_time_fails(tmp_path: Path) -> None:
    base = make(tmp_path / "a", noisy(0.020, seed=1))
    again = make(tmp_path / "b", noisy(0.020, seed=2))
    slow = make(tmp_path / "c", noisy(0.040, seed=3))
    assert rules_broken(again, base) == []
    assert rules_broken(slow, base) == ["baseline-step-time"]
    assert rules_broken(base, slow) == []  # faster is never a failure
    (v,) = compare_to_baseline(slow, base).regressions
    assert "more than the baseline's" in v.message and v.actual > v.limit
    assert v.evidence[0].startswith("baseline: median")


def test_the_bound_is_the_largest_of_interval_floor_and_drift(tmp_path: Path) -> None:
    base = make(tmp_path / "a", noisy(0.020, seed=1, spread=0.0001))
    # within the 5% floor: not a slowdown, however tight both runs are
    within = make(tmp_path / "b", noisy(0.020 * (1 + DEFAULT_TOLERANCE * 0.8), seed=2, spread=0.0001))
    beyond = make(tmp_path / "c", noisy(0.020 * (1 + DEFAULT_TOLERANCE * 1.5), seed=3, spread=0.0001))
    assert rules_broken(within, base) == []
    assert rules_broken(beyond, base) == ["baseline-step-time"]
    # a baseline spread widely: the 99% interval of the medians allows more
    wide = make(tmp_path / "d", noisy(0.020, seed=4, spread=0.015))
    assert rules_broken(beyond, wide) == []
    # a baseline that drifted from 20 to 26 ms allows its drift
    drifting = make(tmp_path / "e", [0.5] + [0.020] * 20 + [0.026] * 20)
    stats = step_stats(drifting)
    assert stats is not None and stats.drift == pytest.approx(0.006)
    assert rules_broken(make(tmp_path / "f", [0.5] + [0.026] * 40), drifting) == []


def test_compilations_and_syncs_per_step(tmp_path: Path) -> None:
    base = make(tmp_path / "a", noisy(0.02, seed=1), compiles=1, syncs_every=10)
    more = make(tmp_path / "b", noisy(0.02, seed=1), compiles=3, syncs_every=2)
    assert rules_broken(more, base) == ["baseline-compiles", "baseline-syncs"]
    assert rules_broken(base, more) == []


def test_check_text_and_json(tmp_path: Path) -> None:
    base = make(tmp_path / "a", noisy(0.020, seed=1))
    slow = make(tmp_path / "b", noisy(0.040, seed=2))
    result = check_report(slow, Rules(), baseline=base)
    # with a baseline the default max-recompiles rule is not added
    assert [r for r, _ in result.rules] == ["baseline-compiles", "baseline-syncs",
                                            "baseline-executions", "baseline-cpu-time",
                                            "baseline-step-time"]
    text = render_check_text(result)
    assert f"against the baseline {tmp_path / 'a'}" in text.splitlines()[0]
    assert "FAIL baseline-step-time: the median step took" in text
    assert "ok   baseline-compiles" in text and "result: FAIL (1 rule violated" in text
    data = encode(result)
    assert data["baseline"] == str(tmp_path / "a") and not data["passed"]
    assert [r["passed"] for r in data["rules"]] == [True, True, True, True, False]
    assert check_report(base, Rules(), baseline=base).passed
    # rules asked for still apply beside the baseline's
    both = check_report(slow, Rules(max_recompiles=0), baseline=base)
    assert [r for r, _ in both.rules][0] == "max-recompiles"


def test_a_loaded_machine_is_not_a_slower_program(tmp_path: Path) -> None:
    """Twice the wall time per step with the same CPU time, while other processes used most of
    the machine: a note, not a failure; twice the CPU time fails on any machine."""
    walls = noisy(0.020, seed=1)
    base = make(tmp_path / "a", walls, cpu=noisy(0.018, seed=5), others=0.05)
    loaded = make(tmp_path / "b", noisy(0.045, seed=2, spread=0.01), cpu=noisy(0.018, seed=6),
                  others=0.8)
    assert others_load(loaded) == pytest.approx(0.8) and others_load(base) == pytest.approx(0.05)
    stats = cpu_stats(loaded)
    assert stats is not None and stats.median == pytest.approx(0.018, abs=0.002)
    result = compare_to_baseline(loaded, base)
    assert result.regressions == []
    (note,) = [n for n in result.notes if "a loaded machine, not a slower program" in n]
    assert note.startswith("the median step took 4") and "other processes used 80% of the " \
        "machine's CPUs during the run (5% during the baseline)" in note
    # twice the work: twice the CPU, loaded or not
    work = make(tmp_path / "c", noisy(0.045, seed=3), cpu=noisy(0.036, seed=7), others=0.8)
    assert rules_broken(work, base) == ["baseline-cpu-time", "baseline-step-time"]
    (cpu,) = [r for r in compare_to_baseline(work, base).regressions
              if r.rule == "baseline-cpu-time"]
    # (windows of 4 steps: the median window of noisy(0.036) is within 0.5 ms of it)
    assert re.match(r"the steady step used 3[56]\.\d ms of CPU, ", cpu.message) and "(+10" in \
        cpu.message
    # a sleep on an unloaded machine: slower by the wall clock, the same CPU: fails
    sleep = make(tmp_path / "d", noisy(0.040, seed=4), cpu=noisy(0.018, seed=8), others=0.05)
    assert rules_broken(sleep, base) == ["baseline-step-time"]
    # the tolerance is the floor of the time rules
    within = make(tmp_path / "e", noisy(0.020, seed=9, spread=0.0001),
                  cpu=noisy(0.018 * 1.3, seed=10, spread=0.0001), others=0.05)
    tight = make(tmp_path / "f", noisy(0.020, seed=11, spread=0.0001),
                 cpu=noisy(0.018, seed=12, spread=0.0001), others=0.05)
    assert rules_broken(within, tight) == ["baseline-cpu-time"]
    assert compare_to_baseline(within, tight, tolerance=0.5).regressions == []


def test_more_executions_per_step_fail(tmp_path: Path) -> None:
    base = make(tmp_path / "a", noisy(0.02, seed=1), executions=1)
    cut = make(tmp_path / "b", noisy(0.02, seed=1), executions=2)
    assert rules_broken(cut, base) == ["baseline-executions"]
    assert rules_broken(base, cut) == []


def test_contention_on_a_loaded_machine_is_allowed_for_in_cpu_time(tmp_path: Path) -> None:
    """Three busy processes on 2 cores added 26% of CPU time to the same work (XLA:CPU's
    threads spin while they wait): on a machine the others load, the CPU-time rule allows
    CONTENTION times their load more, with a note; unloaded, the same +26% fails, and twice the
    work fails loaded or not."""
    base = make(tmp_path / "a", noisy(0.020, seed=1), cpu=noisy(0.021, seed=2, spread=0.0005),
                others=0.0)
    contended = noisy(0.021 * 1.26, seed=3, spread=0.0005)
    loaded = make(tmp_path / "b", noisy(0.060, seed=4, spread=0.01), cpu=contended, others=1.0)
    result = compare_to_baseline(loaded, base)
    assert result.regressions == []
    assert any(n.startswith("CPU time compared with 30% more allowed: other processes used "
                            "100%") for n in result.notes), result.notes
    quiet = make(tmp_path / "c", noisy(0.027, seed=5, spread=0.0005), cpu=contended, others=0.0)
    assert "baseline-cpu-time" in rules_broken(quiet, base)
    work = make(tmp_path / "d", noisy(0.090, seed=6, spread=0.01),
                cpu=noisy(0.042, seed=7, spread=0.0005), others=1.0)
    assert "baseline-cpu-time" in rules_broken(work, base)


def test_cpu_time_is_judged_over_windows_of_steps(tmp_path: Path) -> None:
    """XLA:CPU runs a step's graph after the barrier that launched it, so its CPU lands in one
    step or the next (3 ms and 40 ms, alternating, for one loop's steps on a loaded machine):
    windows of CPU_WINDOW steps keep the sum, and their spread is the work's, not the split's."""
    split = [0.5] + [0.003 if i % 2 else 0.040 for i in range(39)]
    stats = cpu_stats(make(tmp_path / "a", noisy(0.030, seed=1), cpu=split, others=0.0))
    assert stats is not None and stats.median == pytest.approx(0.0215, rel=0.01)
    assert stats.q3 - stats.q1 < 0.001  # step by step: 37 ms apart
