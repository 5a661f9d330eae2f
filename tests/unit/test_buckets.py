"""The bucket advisor: exact DP against brute force, the packer, the advice table (pure)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyscope.analyze.buckets import (
    CostModel,
    advice_for_run,
    advise,
    cost_model_from_info,
    histogram,
    optimal_buckets,
    padding_efficiency,
    plan_cost,
)
from lazyscope.model import Compile
from lazyscope.padding import Packer, bucket_of, pow2_buckets, simulate_packing
from tests.builders import build_run


def brute_force(hist: dict[int, int], k: int, model: CostModel, top: int | None):
    """Every boundary set of at most k observed lengths (always ending at the top): the
    minimum cost and all sets that reach it."""
    values = sorted(hist)
    last = top if top is not None else values[-1]
    inner = [v for v in values if v != last]
    results = []
    for n in range(0, k):
        for combo in itertools.combinations(inner, n):
            bounds = sorted([*combo, last])
            results.append((plan_cost(hist, bounds, model), bounds))
    best = min(c for c, _ in results)
    return best, [b for c, b in results if c <= best * (1 + 1e-12)]


@settings(max_examples=80, deadline=None)
@given(
    hist=st.dictionaries(st.integers(1, 40), st.integers(1, 6), min_size=1, max_size=7),
    k=st.integers(1, 5),
    crossover=st.sampled_from([4.0, 16.0, 64.0, 1e9]),
    force_top=st.booleans(),
)
def test_dp_equals_brute_force(hist, k, crossover, force_top) -> None:
    model = CostModel(crossover=crossover)
    top = 48 if force_top else None
    dp = optimal_buckets(hist, k, model, top=top)
    best_cost, optimal_sets = brute_force(hist, k, model, top)
    assert len(dp) <= k
    assert dp[-1] == (top if top is not None else max(hist))
    assert plan_cost(hist, dp, model) == pytest.approx(best_cost, rel=1e-12)
    assert dp in optimal_sets
    if len(optimal_sets) == 1:
        assert dp == optimal_sets[0]


def test_dp_known_case_and_quadratic_term() -> None:
    hist = {10: 100, 11: 1, 100: 100}
    # [10, 100]: 100*10 + 1*100 + 100*100 = 11100 < [11, 100]: 101*11 + 100*100 = 11111
    assert optimal_buckets(hist, 2, CostModel(crossover=1e12)) == [10, 100]
    assert optimal_buckets(hist, 1) == [100]
    # tokens alone say: split off the short ones; pricing attention's L^2 says: split the
    # long ones, where the quadratic term is paid
    hist2 = {8: 10, 58: 10, 100: 10}
    assert optimal_buckets(hist2, 2, CostModel(crossover=1e12)) == [8, 100]
    assert optimal_buckets(hist2, 2, CostModel(crossover=10.0)) == [58, 100]


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        optimal_buckets({3: 1}, 0)
    with pytest.raises(ValueError, match="empty"):
        optimal_buckets({}, 2)
    with pytest.raises(ValueError, match="below the longest"):
        optimal_buckets({30: 1}, 2, top=20)
    with pytest.raises(ValueError, match="longer than"):
        advise([5, 300], batch=2, top=256)


def test_helpers() -> None:
    assert pow2_buckets(256) == [16, 32, 64, 128, 256]
    assert pow2_buckets(200) == [16, 32, 64, 128, 200]
    assert bucket_of(17, [16, 32]) == 32 and bucket_of(99, [16, 32]) == 32
    assert padding_efficiency({8: 1, 16: 1}, [16]) == pytest.approx(24 / 32)
    assert histogram([3, 1, 3]) == {1: 1, 3: 2}
    assert cost_model_from_info({"dim": 128, "layers": 2, "vocab": 1024}).crossover == 1024
    assert cost_model_from_info({}).crossover > 0


def test_packer_packs_every_sequence_once_and_densely() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(1, 255) for _ in range(4000)]
    packer = Packer(iter(lengths), rows=8, row_len=256)
    seen: list[int] = []
    real = 0
    for _ in range(100):
        rows = packer.next_rows()
        assert len(rows) == 8
        for row in rows:
            assert sum(n for _, n in row) <= 256
            for sid, n in row:
                assert lengths[sid] == n
                seen.append(sid)
            real += sum(n for _, n in row)
    assert len(seen) == len(set(seen))
    assert real / (100 * 8 * 256) >= 0.9
    # the longest pending sequences go first: nothing waits more than a few steps
    assert max(set(range(packer.taken)) - set(seen) - {s for s, _ in packer.pending},
               default=-1) == -1
    assert simulate_packing(lengths[:400], 8, 256) >= 0.9


def test_advise_histogram_kinds_and_horizon() -> None:
    rng = random.Random(1)
    lengths = [rng.randint(1, 255) for _ in range(320)]
    rand = advise(lengths, batch=8, top=256, max_buckets=8)
    grouped = advise(lengths, batch=8, top=256, max_buckets=8, grouped=True)
    assert rand["histogram_of"] == "batch maxima"
    assert sum(rand["histogram"].values()) == 40
    assert grouped["histogram_of"] == "sequence lengths"
    assert sum(grouped["histogram"].values()) == 320
    assert [p["buckets"] for p in rand["per_k"]] == list(range(1, 9))
    # efficiency grows with K; graphs are K
    effs = [p["padding_efficiency"] for p in grouped["per_k"]]
    assert effs == sorted(effs) and effs[-1] > effs[0] + 0.2
    # pad to max on uniform lengths wastes about half
    assert 0.4 < rand["max"]["padding_efficiency"] < 0.6
    # compilation dominates short horizons, execution long ones
    short = advise(lengths, batch=8, top=256, grouped=True, horizon=10)
    long = advise(lengths, batch=8, top=256, grouped=True, horizon=100000)
    assert short["best"]["buckets"] < long["best"]["buckets"]
    packed = [a for a in rand["alternatives"] if a["kind"] == "packed"][0]
    assert packed["padding_efficiency"] >= 0.9 and packed["wins"]


def test_advice_for_run_is_calibrated_on_the_run(tmp_path) -> None:
    rng = random.Random(2)
    steps, events, annotations = [], [], {}
    for i in range(20):
        lens = [rng.randint(1, 255) for _ in range(8)]
        m = max(lens)
        steps.append({"wall_s": 2.0 + 0.01 * m, "compile_count": 1, "compile_s": 2.0})
        events.append({"kind": "compile", "step": i, "seconds": 2.0, "key": f"h{m}",
                       "payload": Compile()})
        annotations[i] = {"seq_len": m, "batch_max_len": m, "rows": 8, "lengths": lens,
                          "real_tokens": sum(lens), "computed_tokens": 8 * m}
    run = build_run(tmp_path / "r", steps=steps, events=events, annotations=annotations,
                    info={"batch": 8, "max_len": 256, "dim": 128, "layers": 2,
                          "vocab": 1024, "policy": "longest"})
    advice = advice_for_run(run, max_buckets=4)
    assert advice is not None and advice["cost_model"]["calibrated"]
    assert advice["cost_model"]["compile_s"] == pytest.approx(2.0)
    assert advice["horizon"] == 20 and advice["run_policy"] == "longest"
    assert len(advice["per_k"]) == 4
    assert advice_for_run(run, horizon=10**7)["best"]["buckets"] >= advice["best"]["buckets"]
    plain = build_run(tmp_path / "plain", steps=[{"wall_s": 1.0}])
    assert advice_for_run(plain) is None
