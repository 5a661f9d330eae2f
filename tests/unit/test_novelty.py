"""The compile-novelty rule (lazyscope/analyze/novelty.py) proved over distributions of runs.

Each simulated run is the sequence of graphs one compile site makes, a call a step: dynamic
padding (the batch's longest of B lengths drawn uniform or lognormal over 1..L), true buckets
(the same lengths padded up to K bucket boundaries), across ranges, batch sizes, run lengths and
compile-to-step cost ratios, many seeds each. The truth comes from each run's own distribution:
the graphs it has not met yet are expected over the horizon with their exact probabilities
(``sum(1 - (1 - q) ** H)`` over the graphs not seen), priced as the rule prices its estimate. The
test prints the share of runs where the verdict is right, overall and on the runs whose truth has
a margin (twice the thresholds, or under half of them), and holds it to 95% there.

Runs whose graphs follow a plan, not a draw (a burst of graphs in the first step, a last partial
batch each epoch, a length curriculum seen to its end, torch.compile going dynamic after one
recompile), have an exact truth: no more graphs; each is judged warm on every seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazyscope.analyze.novelty import (
    COST_SHARE,
    DEFAULT_HORIZON,
    MIN_NEW,
    Outlook,
    outlook,
    range_gaps,
    unseen_graphs,
)

H = DEFAULT_HORIZON
SEEDS = 16


def _cdf(kind: str, length: int) -> np.ndarray:
    """P(a length <= v), v = 0..L: uniform over 1..L, or lognormal (median L/6) clipped."""
    if kind == "uniform":
        return np.arange(length + 1) / length
    mu, sigma = math.log(length / 6), 0.8
    v = np.arange(length + 1) + 0.5
    cdf = 0.5 * (1 + np.array([math.erf((math.log(x) - mu) / (sigma * math.sqrt(2)))
                               for x in v]))
    cdf[0], cdf[-1] = 0.0, 1.0
    return cdf


def _graphs(cdf: np.ndarray, batch: int, buckets: list[int] | None) -> dict[int, float]:
    """Each graph (its padded length) and its chance a step: the batch's longest, padded up."""
    top = cdf ** batch
    if buckets is None:
        q = np.diff(top)
        return {v + 1: float(p) for v, p in enumerate(q) if p > 0}
    out, prev = {}, 0
    for b in buckets:
        out[b] = float(top[b] - top[prev])
        prev = b
    return {k: p for k, p in out.items() if p > 0}


def _judge(seq: list[int], cost: float, steps: int | None = None,
           largest: int | None = None) -> Outlook:
    first: dict[int, int] = {}
    runs: dict[int, int] = {}
    for i, g in enumerate(seq):
        first.setdefault(g, i)
        runs[g] = runs.get(g, 0) + 1
    order = list(first)
    return outlook([runs[g] for g in order], [first[g] for g in order],
                   steps=steps or len(seq), seconds_each=cost, step_seconds=1.0,
                   horizon_steps=H, sizes=order, largest=largest)


def _decide(expected: float, cost: float) -> bool:
    return expected >= MIN_NEW and expected * cost / H >= COST_SHARE


def _margin(expected: float, cost: float) -> bool | None:
    """The truth when it is clear of the thresholds, else None."""
    if expected >= 2 * MIN_NEW and expected * cost / H >= 2 * COST_SHARE:
        return True
    if expected < MIN_NEW / 2 or expected * cost / H < COST_SHARE / 2:
        return False
    return None


SCENARIOS = [(kind, length, batch, n, cost)
             for kind in ("uniform", "lognormal", "buckets4", "buckets8")
             for length in (32, 128, 512, 2048) for batch in (1, 8, 32)
             for n in (16, 40, 200) for cost in (5.0, 50.0, 300.0)]


def test_the_verdict_is_right_over_distributions_of_runs() -> None:
    rng = np.random.default_rng(2026)
    right = total = clear_right = clear_total = 0
    worst: list[tuple[float, tuple]] = []
    cdfs: dict[tuple[str, int], np.ndarray] = {}
    for kind, length, batch, n, cost in SCENARIOS:
        base = "uniform" if kind == "uniform" else "lognormal"
        cdf = cdfs.setdefault((base, length), _cdf(base, length))
        buckets = None
        if kind.startswith("buckets"):
            k = int(kind[-1])
            buckets = sorted({max(1, length * (i + 1) // k) for i in range(k)})
        dist = _graphs(cdf, batch, buckets)
        keys = np.array(list(dist))
        p = np.array([dist[k] for k in keys])
        p /= p.sum()
        ok = clear_ok = clear_n = 0
        for _ in range(SEEDS):
            seq = [int(g) for g in rng.choice(keys, size=n, p=p)]
            seen = set(seq)
            truth_new = sum(1 - (1 - q) ** H for g, q in dist.items() if g not in seen)
            truth = _decide(truth_new, cost)
            got = _judge(seq, cost, largest=length).keeps_compiling
            ok += got == truth
            margin = _margin(truth_new, cost)
            if margin is not None:
                clear_n += 1
                clear_ok += got == margin
        right += ok
        total += SEEDS
        clear_right += clear_ok
        clear_total += clear_n
        if clear_n:
            worst.append((clear_ok / clear_n, (kind, length, batch, n, cost)))
    share, clear_share = right / total, clear_right / clear_total
    worst.sort()
    print(f"\nverdict right on {share:.1%} of {total} simulated runs; on {clear_share:.1%} of "
          f"the {clear_total} whose truth has a margin; weakest: "
          + "; ".join(f"{s} {r:.0%}" for r, s in worst[:3]))
    assert clear_share >= 0.95, clear_share
    assert share >= 0.90, share


def _dynamic_padding(n: int, seed: int, length: int = 512, batch: int = 16) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(rng.integers(1, length + 1, size=batch).max()) for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_dynamic_padding_keeps_compiling_whatever_the_order_of_the_data(seed) -> None:
    """The issue's Trainer: 42 steps, new graphs to the end; the same lengths shuffled again
    (an unseeded loader) get the same verdict."""
    seq = _dynamic_padding(42, seed, length=512, batch=8)
    again = list(np.random.default_rng(seed + 100).permutation(seq))
    a, b = _judge(seq, 7.0 / 0.6), _judge([int(x) for x in again], 7.0 / 0.6)
    assert a.keeps_compiling and b.keeps_compiling
    assert a.expected_new >= 10 and b.expected_new >= 10


def test_a_burst_of_graphs_in_the_first_step_then_one_graph_is_warm() -> None:
    """A closure optimizer tracing the model 21 times in step 0, each graph run once: graphs
    that ran once, yet nothing new for the rest of the run."""
    seq = list(range(100, 121)) + [1] * 60
    o = _judge(seq, 50.0, steps=61)
    assert o.once == 21 and o.rate == 0.0 and not o.keeps_compiling


def test_a_last_partial_batch_each_epoch_is_warm() -> None:
    seq = ([32] * 24 + [7]) * 3
    assert not _judge(seq, 300.0).keeps_compiling


def test_a_length_curriculum_seen_to_its_end_is_warm() -> None:
    seq = [64] * 50 + [128] * 50 + [256] * 50 + [512] * 50
    assert not _judge(seq, 300.0).keeps_compiling


def test_torch_compile_going_dynamic_after_one_recompile_is_warm() -> None:
    seq = [1] + [2] * 80  # the static graph once, then the dynamic one
    assert not _judge(seq, 300.0).keeps_compiling


def test_declared_buckets_bound_what_can_come() -> None:
    """Three of eight declared buckets seen once each: at most five more, whatever Chao1."""
    assert unseen_graphs(3, 0, 3, bound=8) == 3.0
    assert unseen_graphs(9, 0, 9, bound=8) == 0.0
    assert unseen_graphs(9, 0, 9, bound=None) == 36.0


def test_range_gaps_count_a_dense_range_on_its_grid_and_not_sparse_buckets() -> None:
    assert range_gaps([20, 22, 23, 25, 27, 28, 30, 32]) == 5  # 20..32, 8 of 13 seen
    assert range_gaps([16, 48, 64, 96, 112]) == 2  # on the grid of 16: 32 and 80 missing
    assert range_gaps([16, 48, 64, 96, 112], largest=128) == 3  # and 128
    assert range_gaps([11, 19, 25, 35, 42, 49, 56, 62]) == 0  # buckets: 8 of 52
    assert range_gaps([4, 9]) == 0
    assert range_gaps([16, 32, 64, 128, 256]) == 0  # powers of two: 5 of 16 on the grid
