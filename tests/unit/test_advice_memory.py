"""Memory in the padding advice (issue 32, item 5): the memory model fitted on a run's graph
bytes against their padded length, each plan's largest graph predicted with it, and the plans
that would not fit a ``--device-memory`` ruled out of the ranking, the recommendation, the
JSON and the code to paste (pure: no XLA)."""

from __future__ import annotations

import json
import random

import pytest

from lazyscope.analyze.buckets import (
    Advice,
    CostModel,
    NothingFits,
    advise,
    largest_shape,
    prior_model,
)
from lazyscope.analyze.memory import fit_memory
from lazyscope.commands.cases import advise_target
from lazyscope.core.errors import UsageError
from lazyscope.core.padding import Policy
from lazyscope.model.codec import encode
from lazyscope.render.advice import render_advice_text, render_emit
from lazyscope.render.schema import schema_of


def bytes_of(a: float, b: float, c: float, length: int) -> int:
    return round(a + b * length + c * length * length)


def test_a_quadratic_is_recovered_from_three_or_more_lengths() -> None:
    points = {n: bytes_of(40_000, 300, 20, n) for n in (16, 48, 64, 128)}
    m = fit_memory(points, rows=8, site="train.py:12")
    assert m is not None and m.form == "quadratic"
    assert (m.fixed, m.linear, m.quadratic) == pytest.approx((40_000, 300, 20), rel=1e-3)
    # a measured length is its measured graph; an unseen one, the fit
    assert m.bytes_at(64) == points[64]
    assert m.bytes_at(512) == pytest.approx(bytes_of(40_000, 300, 20, 512), rel=1e-4)
    # half the rows: the fixed part stays, the per-row part halves
    assert m.bytes_at(512, rows=4) == pytest.approx(
        40_000 + (300 * 512 + 20 * 512 * 512) / 2, rel=1e-4)
    assert "train.py:12" in m.how and "L^2" in m.how


def test_two_lengths_are_a_line_one_is_proportional_and_a_bend_down_is_refused() -> None:
    line = fit_memory({100: 1_100_000, 200: 2_100_000}, rows=4)
    assert line is not None and line.form == "linear"
    assert line.bytes_at(400) == pytest.approx(4_100_000, rel=1e-6)
    one = fit_memory({128: 1_000_000}, rows=4)
    assert one is not None and one.form == "proportional"
    assert one.bytes_at(256) == 2_000_000 and one.bytes_at(256, rows=2) == 1_000_000
    assert "unknown" in one.how and "one length" in one.how
    # bytes that flatten out (concave): a quadratic would fall past the data; a line does not
    bend = fit_memory({64: 1_000_000, 128: 1_700_000, 256: 2_200_000}, rows=4)
    assert bend is not None and bend.form == "linear"
    assert bend.bytes_at(512) > bend.bytes_at(256)
    assert fit_memory({}, rows=4) is None


def test_the_largest_padded_shape_of_each_policy() -> None:
    assert largest_shape(Policy("packed", (512,), rows=2, row_len=512), 8, 256) == (2, 512)
    assert largest_shape(Policy("buckets", (64, 128, 256)), 8, 256) == (8, 256)
    assert largest_shape(Policy("max", (256,)), 8, 256) == (8, 256)
    assert largest_shape(Policy("longest"), 8, 200) == (8, 200)


def _lengths() -> list[int]:
    rng = random.Random(3)
    return [min(255, max(1, round(rng.lognormvariate(3.66, 0.78)))) for _ in range(320)]


def test_a_policy_that_does_not_fit_is_never_recommended_nor_emitted() -> None:
    # attention-like memory: scores of rows x L x L; 8 rows of 256 take 7 MB
    memory = fit_memory({n: bytes_of(1e6, 4_000, 80, n) for n in (64, 128, 192, 256)}, rows=8)
    assert memory is not None
    # a cost nearly linear in L: longer packed rows pack better and win
    cost = prior_model(CostModel(crossover=1e6), 8, 256)
    free = advise(_lengths(), batch=8, top=256, horizon=100_000, model=cost, memory=memory)
    best = free.recommended
    assert best.policy.packed and best.policy.row_len and best.policy.row_len > 256
    assert all(p.fits is None and p.graph_bytes for p in free.plans) and not free.ruled_out
    padded = memory.bytes_at(256)
    assert free.plan_named("pad to max").graph_bytes == padded
    assert best.graph_bytes is not None and best.graph_bytes > padded
    # a device that holds the padded batches but not the longer packed rows
    held = advise(_lengths(), batch=8, top=256, horizon=100_000, model=cost, memory=memory,
                  device_memory=padded + 1)
    assert best.name in [p.name for p in held.ruled_out]
    assert all(p.fits for p in held.plans) and all(p.fits is False for p in held.ruled_out)
    assert held.recommended.graph_bytes is not None
    assert held.recommended.graph_bytes <= padded + 1
    data = json.loads(json.dumps(encode(held)))
    assert data["device_memory"] == padded + 1 and data["memory"]["form"] == "quadratic"
    assert data["recommended"]["fits"] is True
    assert {p["policy"] for p in data["ruled_out"]} == {p.policy.label() for p in held.ruled_out}
    assert all(p["predicted_graph_memory"] > padded + 1 for p in data["ruled_out"])
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, schema_of(Advice, "lazyscope advise --format json"))
    text = render_advice_text(held)
    assert "ruled out: their largest graph would not fit" in text
    assert f"{best.name:<26} largest batch {best.policy.rows}x{best.policy.row_len}" in text
    emit = render_emit(held)
    assert f"row_len = max({best.policy.row_len}," not in emit
    assert held.recommended.name in emit.splitlines()[0]
    # a generous device rules nothing out: the same recommendation as with none
    roomy = advise(_lengths(), batch=8, top=256, horizon=100_000, model=cost, memory=memory,
                   device_memory=10**12)
    assert not roomy.ruled_out and roomy.recommended.name == best.name
    with pytest.raises(NothingFits, match="no policy fits"):
        advise(_lengths(), batch=8, top=256, horizon=100_000, model=cost, memory=memory,
               device_memory=padded // 2)


def test_without_graphs_memory_is_not_measured(tmp_path) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text("\n".join(str(n) for n in _lengths()) + "\n")
    advice = advise_target(None, lengths_file=path, batch=8)
    assert advice.memory is None and advice.memory_note.startswith("not measured")
    assert all(p.graph_bytes is None for p in advice.plans)
    assert "graph memory: not measured: a lengths file has no compiled graphs" in \
        render_advice_text(advice)
    assert "predicted_graph_memory" not in json.dumps(encode(advice))
    with pytest.raises(UsageError, match="--device-memory cannot be applied: not measured"):
        advise_target(None, lengths_file=path, batch=8, device_memory=10**9)
