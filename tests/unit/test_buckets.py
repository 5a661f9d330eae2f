"""The padding advisor: exact DP against brute force, the packer, the length estimate from a
run's graphs, the ranking and the measured rows beside it (pure: no XLA)."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyscope
from lazyscope.analyze.buckets import (
    DEFAULT_HORIZON,
    Advice,
    CostModel,
    MeasuredRow,
    NoLengths,
    advice_for_run,
    advise,
    cost_model_from_info,
    estimate_sequences,
    histogram,
    lengths_from_run,
    match_measured,
    optimal_buckets,
    padding_efficiency,
    plan_cost,
)
from lazyscope.core.padding import Packer, Policy, bucket_of, pow2_buckets, simulate_packing
from lazyscope.model import Compile, GraphInput
from lazyscope.model.codec import encode
from lazyscope.render.schema import schema_of
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


def test_advise_ranks_policies_and_horizon() -> None:
    rng = random.Random(1)
    lengths = [rng.randint(1, 255) for _ in range(320)]
    rand = advise(lengths, batch=8, top=256, max_buckets=8, horizon=40)
    grouped = advise(lengths, batch=8, top=256, max_buckets=8, grouped=True, horizon=40)
    assert rand.lengths.maxima and len(rand.lengths.maxima) == 40  # histogram of batch maxima
    assert grouped.lengths.grouped
    assert [p.buckets for p in rand.per_k] == list(range(1, 9))
    # ranked best first by predicted total time; every plan priced over the same data
    totals = [p.total_s for p in rand.plans]
    assert totals == sorted(totals)
    # pow2 pads these batches (every maximum above 128) as pad to max does: left out
    assert {p.name for p in (*rand.plans, *rand.same_shapes)} >= {"pad to max", "pad to longest",
                                                                   "pow2"}
    real = 40 * 8 * (sum(lengths) / len(lengths))
    for p in rand.plans:
        assert p.tokens_per_s == pytest.approx(real / p.total_s)
    # efficiency grows with K when batches are grouped; graphs are K
    effs = [p.padding_efficiency for p in grouped.per_k]
    assert effs == sorted(effs) and effs[-1] > effs[0] + 0.2
    # pad to max on uniform lengths wastes about half
    assert 0.4 < rand.plan_named("pad to max").padding_efficiency < 0.6
    # compilation dominates short horizons, execution long ones
    short = advise(lengths, batch=8, top=256, grouped=True, horizon=10, packing=False)
    long = advise(lengths, batch=8, top=256, grouped=True, horizon=100000, packing=False)
    assert short.best_buckets.buckets < long.best_buckets.buckets
    # packing: one shape, little padding, fewer steps for the same data; it needs the model
    packed = rand.recommended
    assert packed.policy.packed and packed.padding_efficiency >= 0.9 and packed.graphs == 1
    assert packed.steps < 40 and packed.model_change
    assert not rand.best_without_model_change.model_change
    # the default horizon is a long training run, said
    assert advise(lengths, batch=8, top=256).horizon == DEFAULT_HORIZON
    assert "long training run" in advise(lengths, batch=8, top=256).horizon_from
    data = encode(rand)
    assert data["recommended"]["kind"] == "packed" and data["plans"][0] == data["recommended"]
    assert data["lengths"]["sequences"]["count"] == 320


def test_packing_wins_on_skewed_lengths_over_a_long_horizon() -> None:
    """The issue's case: lognormal lengths (median ~39, p99 ~240), tiny decoder, batch 8."""
    rng = random.Random(3)
    lengths = [min(255, max(1, round(rng.lognormvariate(3.66, 0.78)))) for _ in range(320)]
    model = cost_model_from_info({"dim": 128, "layers": 2, "vocab": 1024})
    advice = lazyscope.advise(lengths, batch=8, max_len=256, horizon=100_000,
                              dims={"dim": 128, "layers": 2, "vocab": 1024})
    assert advice.cost_model.crossover == model.crossover
    assert advice.recommended.policy.packed
    assert advice.recommended.tokens_per_s > 3 * advice.plan_named("pad to max").tokens_per_s
    # without packing, a long run amortises several buckets (the issue: 40 steps kept one)
    no_pack = lazyscope.advise(lengths, batch=8, max_len=256, horizon=100_000, packing=False,
                               dims={"dim": 128, "layers": 2, "vocab": 1024})
    assert no_pack.best_buckets.buckets > 1
    assert all(not p.policy.packed for p in no_pack.plans)


def test_estimated_lengths_invert_the_batch_maximum() -> None:
    """F = F_max^(1/B): sequences drawn from the estimate have batch maxima distributed like
    the observed ones, and a median near the true one."""
    rng = random.Random(5)
    true = [rng.randint(1, 200) for _ in range(8 * 400)]
    maxima = [max(true[i:i + 8]) for i in range(0, len(true), 8)]
    est = estimate_sequences(maxima, 8, n=8 * 2000)
    est_max = sorted(max(est[i:i + 8]) for i in range(0, len(est), 8))
    obs = sorted(maxima)
    for q in (0.1, 0.5, 0.9):
        assert abs(est_max[int(q * len(est_max))] - obs[int(q * len(obs))]) <= 8
    assert abs(sorted(est)[len(est) // 2] - 100) <= 15
    assert max(est) <= max(maxima) and min(est) >= 1


def _graph_run(tmp_path, lengths_per_step, *, reuse: dict[int, int] | None = None, batch=8):
    """A run whose graphs take the token ids as an s64[batch, L] input: a compile at each step
    with a new L (as pad-to-longest does), plus parameters that never vary."""
    steps, events, seen = [], [], {}
    for i, n in enumerate(lengths_per_step):
        new = n not in seen
        seen.setdefault(n, f"g{n}")
        steps.append({"wall_s": (2.0 if new else 0.0) + 0.001 * n, "compile_count": int(new),
                      "compile_s": 2.0 if new else 0.0})
        if new:
            events.append({"kind": "compile", "step": i, "seconds": 2.0, "key": f"g{n}",
                           "payload": Compile(cause_kind="barrier", inputs=[
                               GraphInput("f32", [256, 64]), GraphInput("s64", [batch, n]),
                               GraphInput("f32", [64])])})
    return build_run(tmp_path, steps=steps, events=events, info={})


def test_advise_reads_a_plain_runs_graphs(tmp_path) -> None:
    """No annotations: the lengths are the varying dimension of the run's graphs."""
    rng = random.Random(7)
    per_step = [rng.randint(20, 120) for _ in range(30)]
    run = _graph_run(tmp_path / "r", per_step)
    lengths = lengths_from_run(run)
    assert lengths.source == "graph inputs" and not lengths.exact
    assert lengths.what == "dim 1 of the s64[8,?] input" and lengths.batch == 8
    assert lengths.top == -(-max(per_step) // 8) * 8  # the longest seen, to a multiple of 8
    known = len(set(per_step))
    assert lengths.steps_known == known and lengths.steps == 30
    assert sorted(lengths.maxima) == sorted(set(per_step))
    assert any("reused a graph" in n for n in lengths.notes) == (known < 30)
    advice = advice_for_run(run, max_buckets=4)
    assert advice.cost_model.calibrated
    assert advice.cost_model.compile_s == pytest.approx(2.0, rel=0.05)  # and the seconds around it
    # each known step executed 0.001 s per token of its padded length: unit_s is close
    assert advice.cost_model.unit_s == pytest.approx(0.001 / 8 / (1 + 70 / 1024), rel=0.3)
    assert advice.horizon == DEFAULT_HORIZON and len(advice.per_k) == 4
    assert advice_for_run(run, horizon=10).horizon == 10


def test_advise_refuses_an_accumulation_and_a_run_without_graphs(tmp_path) -> None:
    grow = _graph_run(tmp_path / "grow", list(range(1, 11)), batch=1)
    with pytest.raises(NoLengths, match="grows at every step"):
        advice_for_run(grow)
    plain = build_run(tmp_path / "plain", steps=[{"wall_s": 1.0}])
    with pytest.raises(NoLengths, match="no graph inputs"):
        advice_for_run(plain)
    same = _graph_run(tmp_path / "same", [64] * 5)
    with pytest.raises(NoLengths, match="no dimension"):
        advice_for_run(same)


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
    advice = advice_for_run(run, max_buckets=4, horizon=20)
    assert advice.cost_model.calibrated and advice.lengths.exact
    assert advice.lengths.source == "annotations" and advice.lengths.top == 256
    # the first graph apart (the compiler's warm-up), the later ones each: both 2 s here
    assert advice.cost_model.compile_s == pytest.approx(2.0, rel=0.01)
    assert (advice.cost_model.first_graphs, advice.cost_model.first_s) == \
        (1, pytest.approx(2.0, rel=0.02))
    assert advice.horizon == 20 and advice.run_policy == "longest"
    assert len(advice.per_k) == 4
    assert advice_for_run(run, horizon=10**7, packing=False).best_buckets.buckets >= \
        advice_for_run(run, horizon=20, packing=False).best_buckets.buckets


def test_measured_rows_sit_beside_their_plans(tmp_path) -> None:
    rng = random.Random(4)
    lengths = [rng.randint(1, 255) for _ in range(320)]
    advice = advise(lengths, batch=8, top=256, horizon=1000)
    rows = [MeasuredRow("max", Policy("max", (256,)), 40, 1, 0.5, 1000.0),
            MeasuredRow("packed", Policy("packed", (256,), rows=8, row_len=256), 40, 1, 0.97,
                        1900.0),
            MeasuredRow("bucket:64,256", Policy("buckets", (64, 256)), 40, 2, 0.55, 900.0)]
    out = match_measured(advice, rows, compared="DIR")
    assert [m.policy for m in out.measured] == ["max", "packed", "bucket:64,256"]
    by = {m.policy: m for m in out.measured}
    assert by["max"].plan == "pad to max" and by["packed"].plan == "packed 8x256"
    # predicted for the comparison's 40 steps, not for the advice's horizon
    assert by["max"].predicted_tokens_per_s < advice.plan_named("pad to max").tokens_per_s
    assert by["bucket:64,256"].predicted_graphs <= 2
    # a packed row ran 40 packed steps: more data than 40 padded steps, compile amortised
    assert by["packed"].predicted_tokens_per_s > by["max"].predicted_tokens_per_s * 1.5
    assert encode(out)["measured"][0]["tokens_per_s"] == 1000.0


def test_advice_json_follows_its_schema(tmp_path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    rng = random.Random(6)
    run = _graph_run(tmp_path / "r", [rng.randint(20, 120) for _ in range(20)])
    advice = advice_for_run(run, max_buckets=3)
    schema = schema_of(Advice, "lazyscope advise --format json")
    rows = [MeasuredRow("max", Policy("max", (120,)), 20, 1, None, 10.0)]
    for a in (advice, match_measured(advice, rows, compared="D"),
              advise([rng.randint(1, 255) for _ in range(200)], batch=8, top=256)):
        jsonschema.validate(json.loads(json.dumps(encode(a))), schema)
    broken = encode(advice)
    del broken["plans"][0]["predicted_total"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_calibration_prices_a_step_by_the_steady_steps_and_a_graph_by_its_step(tmp_path) -> None:
    """A step's rows cost the median steady step's rate (a steady step that waited on something
    else does not set it); the seconds the rows do not explain are the new graphs'; a first
    step's extra graph is compiled once, not for every shape."""
    rng = random.Random(5)
    unit = 1e-4
    steps, events, annotations = [], [], {}
    seen: set[int] = set()
    for i in range(40):
        m = rng.choice([40, 60, 80, 100, 120]) if i > 1 else 40
        new = m not in seen or i == 1  # step 1 compiles a second graph for step 0's length
        seen.add(m)
        units = 8 * (m + m * m / 1024)
        slow = 0.5 if i in (9, 19) else 0.0  # a steady step that waited on something else
        wall = units * unit + slow + (3.0 if new else 0.0)  # 2 s in the compiler, 1 s around it
        steps.append({"wall_s": wall, "compile_count": int(new), "compile_s": 2.0 if new else 0.0})
        if new:
            events.append({"kind": "compile", "step": i, "seconds": 2.0, "key": f"g{m}-{i}",
                           "payload": Compile()})
        annotations[i] = {"seq_len": m, "batch_max_len": m, "rows": 8}
    run = build_run(tmp_path / "r", steps=steps, events=events, annotations=annotations,
                    info={"batch": 8, "max_len": 120})
    model = advice_for_run(run, horizon=40).cost_model
    assert model.unit_s == pytest.approx(unit, rel=1e-6)
    # every second the rows do not explain is the new graphs' (the two waits included)
    compiles = sum(st["compile_count"] for st in steps)
    assert model.compile_s == pytest.approx((3.0 * compiles + 1.0) / compiles, rel=1e-3)
    assert (model.graphs_per_shape, model.extra_graphs) == (1.0, 1.0)
    # pad to max compiles its one shape and the first step's extra graph
    advice = advice_for_run(run, horizon=40, packing=False)
    assert advice.plan_named("pad to max").graphs == pytest.approx(2.0)


def test_a_plan_that_pads_as_a_better_ranked_one_does_is_left_out() -> None:
    rng = random.Random(8)
    values = [rng.randint(70, 120) for _ in range(800)]  # every batch maximum is above 64
    advice = advise(values, batch=8, top=128, horizon=50, packing=False)
    names = [p.name for p in advice.plans]
    assert "pad to max" in names and "pow2" not in names, names
    assert any(n.startswith("pow2 pads every batch as pad to max") for n in advice.notes)
    # a compare row that ran pow2 is still set beside its prediction
    rows = [MeasuredRow("pow2", Policy("buckets", tuple(pow2_buckets(128))), 50, 1, 0.7, 10.0)]
    assert match_measured(advice, rows, compared="D").measured[0].plan == "pow2"
    spread = advise([rng.randint(1, 128) for _ in range(800)], batch=1, top=128, horizon=50)
    assert "pow2" in [p.name for p in spread.plans]  # short batches: pow2 pads them apart


def test_the_runs_own_policy_is_priced_on_the_run_itself(tmp_path) -> None:
    """Pad to longest is what a plain run does: over its own steps, its measured seconds; past
    them, a compile for each shape expected new and its median steady step for each step."""
    rng = random.Random(9)
    per_step = [rng.randint(20, 120) for _ in range(30)]
    run = _graph_run(tmp_path / "r", per_step)
    walls = [float(w) for w in run.steps.values("wall_s")]
    compile_s = float(run.steps.values("compile_s").sum())
    own = advice_for_run(run, horizon=30).plan_named("pad to longest")
    assert own.total_s == pytest.approx(sum(walls))
    assert own.compile_s == pytest.approx(compile_s)
    assert own.graphs == len(set(per_step))
    longer = advice_for_run(run, horizon=300).plan_named("pad to longest")
    assert longer.graphs > own.graphs and longer.total_s > own.total_s
    assert longer.execute_s > own.execute_s


def test_past_the_run_the_runs_own_policy_is_priced_as_every_plan_is(tmp_path) -> None:
    """Over a long horizon, pad to longest's steps past the run cost what the calibrated model
    says, as every other plan's do: a step of it never costs more than a step padded to max
    (the steady steps right after a compile wait on it: their wall is no step's price)."""
    rng = random.Random(11)
    steps, events = [], []
    seen: set[int] = set()
    for i in range(40):
        m = rng.randint(20, 120)
        new = m not in seen
        seen.add(m)
        after_compile = bool(steps) and steps[-1]["compile_count"] > 0
        wall = 8 * (m + m * m / 1024) * 1e-5 + (2.0 if new else 0.0) + \
            (0.5 if after_compile and not new else 0.0)
        steps.append({"wall_s": wall, "compile_count": int(new), "compile_s": 2.0 if new else 0.0})
        if new:  # a plain run: the lengths are its graphs' inputs
            events.append({"kind": "compile", "step": i, "seconds": 2.0, "key": f"g{m}",
                           "payload": Compile(cause_kind="barrier", inputs=[
                               GraphInput("s64", [8, m]), GraphInput("f32", [64])])})
    run = build_run(tmp_path / "r", steps=steps, events=events, info={})
    advice = advice_for_run(run, horizon=100_000, packing=False)
    assert advice.lengths.source == "graph inputs"
    longest, top = advice.plan_named("pad to longest"), advice.plan_named("pad to max")
    assert longest.execute_s / longest.steps <= top.execute_s / top.steps
    assert advice.recommended.name != "pad to longest"


def test_a_process_first_graphs_are_priced_apart_from_the_later_ones(tmp_path) -> None:
    """The first graphs of a process cost more than its later ones (the compiler's warm-up, the
    optimizer's state built in the first steps' graphs): a plan that compiles as few graphs as
    the first ones pays what they took, not that many times the run's mean compile (which the
    many cheaper later graphs of a pad-to-longest run set)."""
    rng = random.Random(3)
    steps, events, annotations = [], [], {}
    seen: set[int] = set()
    for i in range(24):
        lens = [rng.randint(1, 127) for _ in range(8)] if i else [40] * 8
        m = 40 if i == 1 else max(lens)
        lens = lens if i != 1 else [40] * 8
        new = m not in seen or i == 1  # step 1 compiles a second graph for step 0's length
        seen.add(m)
        seconds = (6.0 if i < 2 else 3.0) if new else 0.0  # the first two: 6 s each
        steps.append({"wall_s": seconds + 8 * m * 1e-4, "compile_count": int(new),
                      "compile_s": seconds})
        if new:
            events.append({"kind": "compile", "step": i, "seconds": seconds,
                           "key": f"g{m}-{i}", "payload": Compile()})
        annotations[i] = {"seq_len": m, "batch_max_len": m, "rows": 8, "lengths": lens}
    run = build_run(tmp_path / "r", steps=steps, events=events, annotations=annotations,
                    info={"batch": 8, "max_len": 128})
    advice = advice_for_run(run, horizon=24)
    model = advice.cost_model
    assert model.first_graphs == 2 and model.first_s == pytest.approx(12.0, rel=0.01)
    assert model.compile_s == pytest.approx(3.0, rel=0.01)
    pad_to_max = advice.plan_named("pad to max")
    assert pad_to_max is not None and pad_to_max.graphs == pytest.approx(2)
    assert pad_to_max.compile_s == pytest.approx(12.0, rel=0.01)  # not 2 x the mean (3.25 s)
    assert model.compile_cost(5) == pytest.approx(12.0 + 3 * 3.0, rel=0.01)


def test_a_measured_mean_sets_the_lengths_below_the_shortest_maximum() -> None:
    """The batch maxima say nothing of the lengths below the smallest of them (here most of the
    sequences): with the real tokens a sequence the run measured, they are spread so that the
    estimate's mean is that one, not from 1 up."""
    rng = random.Random(4)
    true = [rng.randint(40, 128) for _ in range(8 * 200)]
    maxima = [max(true[i:i + 8]) for i in range(0, len(true), 8)][:23]
    mean = sum(true) / len(true)
    blind = estimate_sequences(maxima, 8)
    told = estimate_sequences(maxima, 8, mean=mean)
    assert abs(sum(blind) / len(blind) - mean) > 10  # from 1 up: far too short
    assert sum(told) / len(told) == pytest.approx(mean, rel=0.03)
    assert max(told) == max(blind) == max(maxima)


def test_graphs_are_priced_by_their_structure_and_lazyscopes_own_time_is_no_steps(tmp_path) -> None:
    """A Trainer's run, as XLA compiles it: step 0 a tiny graph, step 1 a small graph and the
    training step without optimizer state yet (its own ops), then at each new length the small
    graph and the training step with state (the same ops at every length). The structure says
    which graphs a plan pays once (step 0's and step 1's training step: a plan of one shape
    still compiles the training step twice) and which at every shape, each at what it cost (the
    small ones next to nothing); lazyscope's own seconds (``own_s``, its look at each new graph)
    and the program's start (step 0's host time) are in no step's price."""
    tiny, small = {"constant": 1, "tuple": 1}, {"compare": 3, "reduce": 1, "tuple": 1}
    nostate, step = {"dot": 54, "add": 300, "broadcast": 801}, {"dot": 54, "add": 316}
    unit, own_after = 1e-4, 0.4
    rng = random.Random(12)
    steps, events, annotations = [], [], {}
    seen: set[int] = set()
    for i in range(17):
        m = 40 if i < 2 else rng.choice([48, 56, 64, 72, 80, 88, 96, 104, 112, 120])
        graphs = ([("t", tiny, 0.01)] if i == 0 else [("s", small, 0.04), ("x", nostate, 3.8)]
                  if i == 1 else [("s", small, 0.04), ("y", step, 3.7)] if m not in seen else [])
        seen.add(m)
        units = 8 * (m + m * m / 1024)
        compile_s = sum(sec for _, _, sec in graphs)
        own = own_after if i and steps[-1]["compile_count"] else 0.0
        # step 0 holds the program's start (1.5 s of host time before its first barrier)
        steps.append({"wall_s": units * unit + compile_s + (1.5 if i == 0 else 0.0) + own,
                      "compile_count": len(graphs), "compile_s": compile_s, "own_s": own,
                      "barrier_s": units * unit + compile_s})
        for name, ops, sec in graphs:
            events.append({"kind": "compile", "step": i, "seconds": sec, "key": f"{name}{m}-{i}",
                           "payload": Compile(ops=ops)})
        annotations[i] = {"seq_len": m, "batch_max_len": m, "rows": 8}
    run = build_run(tmp_path / "r", steps=steps, events=events, annotations=annotations,
                    info={"batch": 8, "max_len": 120})
    model = advice_for_run(run, horizon=17).cost_model
    assert model.unit_s == pytest.approx(unit, rel=1e-6)  # own_s taken out of the steps
    assert (model.graphs_per_shape, model.extra_graphs) == (2.0, 2.0)
    # the first shape: step 0's graph (not the program's start), step 1's two, the first
    # training step with state; each further shape its small graph and training step
    assert model.first_graphs == 4
    assert model.first_s == pytest.approx(0.01 + 0.04 + 3.8 + 3.7, rel=1e-3)
    assert model.compile_s == pytest.approx((0.04 + 3.7) / 2, rel=1e-3)
    top = advice_for_run(run, horizon=17, packing=False).plan_named("pad to max")
    assert top.graphs == pytest.approx(4) and top.compile_s == pytest.approx(model.first_s)
