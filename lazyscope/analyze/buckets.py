"""Bucket advice: static-shape padding boundaries from a length histogram, exactly.

Contract (pure: no I/O, no printing, standard library only):

* :class:`CostModel` prices one padded row of length ``L`` as ``L + L**2 / crossover`` "units"
  (linear layers are linear in L, attention's scores are quadratic; ``crossover`` is the length
  at which both terms are equal, ``6 * dim + vocab / 2`` for a GPT block, see
  :func:`cost_model_from_info`), plus, when calibrated on a run, seconds per unit and seconds
  per compiled graph.
* :func:`optimal_buckets` is an exact dynamic programme: for a histogram ``{length: count}`` and
  ``k`` buckets it returns the boundaries minimising ``sum(count * cost(bucket(length)))``, where
  ``bucket(length)`` is the smallest boundary >= length. Optimal boundaries are observed
  lengths (plus an optional forced ``top``), so the DP runs over the distinct lengths:
  ``O(k * n**2)``.
* :func:`advise` builds the whole table (each K up to ``max_buckets``, next to pow2 and
  pad-to-max, and grouped batching / packing when they would win) and picks K at the best
  predicted end-to-end time (compilation + execution over a horizon).
* :func:`advice_for_run` does the same for a traced run whose steps carry ``seq_len`` and
  ``batch_max_len`` annotations (the ``decoder`` scenario), calibrated on its measurements;
  ``None`` for runs without them.
* Packing is predicted by simulating :class:`lazyscope.padding.Packer`, the packer the
  scenarios' ``packed`` policy uses (the policies themselves live in :mod:`lazyscope.padding`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lazyscope.analyze.recompiles import CHURN, explain_recompiles
from lazyscope.padding import bucket_of, pow2_buckets, simulate_packing

#: without a measured run, one compile is priced as this many executions of a full-length batch
#: (measured on XLA:CPU with the tiny decoder: ~4.2 s per compile, ~0.22 s per step at max length)
COMPILE_PRIOR_STEPS = 20.0
DEFAULT_CROSSOVER = 1024.0


@dataclass(frozen=True)
class CostModel:
    """Predicted cost of padded rows. ``unit_s``/``compile_s`` are seconds when calibrated,
    otherwise relative (``unit_s`` = 1, ``compile_s`` = COMPILE_PRIOR_STEPS full batches)."""

    crossover: float = DEFAULT_CROSSOVER
    unit_s: float = 1.0
    compile_s: float = 0.0
    graphs_per_shape: float = 1.0
    calibrated: bool = False

    def row(self, length: int) -> float:
        """Units for one row padded to ``length``: a linear term plus attention's quadratic one."""
        return length + length * length / self.crossover


def cost_model_from_info(info: dict[str, Any]) -> CostModel:
    """A model whose quadratic term matches the decoder's dims (``dim``, ``vocab`` in info).

    Per token a block does ~12*dim^2 multiply-adds in linear layers and the LM head dim*vocab;
    per pair of tokens attention does 2*dim per layer: crossover = (12*dim^2*layers + dim*vocab)
    / (2*dim*layers) = 6*dim + vocab/(2*layers).
    """
    try:
        dim = float(info["dim"])
        layers = float(info.get("layers", 1))
        vocab = float(info.get("vocab", 0))
        crossover = 6 * dim + vocab / (2 * max(layers, 1.0))
    except (KeyError, TypeError, ValueError):
        crossover = DEFAULT_CROSSOVER
    return CostModel(crossover=crossover if crossover > 0 else DEFAULT_CROSSOVER)


def histogram(values: Iterable[int]) -> dict[int, int]:
    """``{length: count}``, sorted by length."""
    return dict(sorted(Counter(int(v) for v in values).items()))


def plan_cost(hist: dict[int, int], boundaries: list[int], model: CostModel) -> float:
    """Units spent padding every item of ``hist`` to its bucket."""
    return sum(c * model.row(bucket_of(v, boundaries)) for v, c in hist.items())


def padding_efficiency(hist: dict[int, int], boundaries: list[int]) -> float:
    """Real / computed tokens when each item is padded to its bucket (items = rows)."""
    real = sum(v * c for v, c in hist.items())
    computed = sum(bucket_of(v, boundaries) * c for v, c in hist.items())
    return real / computed if computed else 1.0


def optimal_buckets(
    hist: dict[int, int], k: int, model: CostModel | None = None, top: int | None = None
) -> list[int]:
    """The exact cost-minimising boundaries with at most ``k`` buckets.

    ``top`` forces the last boundary (e.g. the model's max length, so unseen lengths still fit);
    it must be >= every length in ``hist``. Ties are broken towards fewer buckets, then smaller
    previous boundaries. Raises ValueError for ``k < 1`` or an empty histogram.
    """
    if k < 1:
        raise ValueError(f"the number of buckets must be at least 1, got {k}")
    if not hist:
        raise ValueError("empty length histogram")
    model = model or CostModel()
    values = sorted(hist)
    if top is not None:
        if top < values[-1]:
            raise ValueError(f"top {top} is below the longest length {values[-1]}")
        if top != values[-1]:
            values.append(top)
    counts = [hist.get(v, 0) for v in values]
    n = len(values)
    prefix = [0]
    for c in counts:
        prefix.append(prefix[-1] + c)
    rows = [model.row(v) for v in values]
    inf = math.inf
    # best[j]: cost of covering values[0..j] with buckets whose last boundary is values[j]
    best = [rows[j] * prefix[j + 1] for j in range(n)]
    choice: list[list[int]] = [[-1] * n]
    result_cost, result_k = best[n - 1], 1
    for kk in range(2, min(k, n) + 1):
        new = [inf] * n
        arg = [-1] * n
        for j in range(kk - 1, n):
            rj, pj = rows[j], prefix[j + 1]
            bestv, besti = inf, -1
            for i in range(kk - 2, j):
                v = best[i] + rj * (pj - prefix[i + 1])
                if v < bestv:  # strict: ties keep the smaller previous boundary
                    bestv, besti = v, i
            new[j], arg[j] = bestv, besti
        choice.append(arg)
        best = new
        if best[n - 1] < result_cost:  # strict: ties keep fewer buckets
            result_cost, result_k = best[n - 1], kk
    # backtrack result_k buckets ending at n-1
    bounds = []
    j = n - 1
    for kk in range(result_k, 0, -1):
        bounds.append(values[j])
        j = choice[kk - 1][j] if kk > 1 else -1
    return sorted(bounds)


def _plan(name: str, hist: dict[int, int], bounds: list[int], model: CostModel, *,
          items_per_step: float, rows_per_item: int, horizon: int, kind: str,
          real: int) -> dict[str, Any]:
    """One candidate: predicted efficiency (``real`` tokens over padded ones), graphs,
    execute/compile/total time over ``horizon`` steps."""
    n_items = sum(hist.values())
    computed = rows_per_item * sum(c * bucket_of(v, bounds) for v, c in hist.items())
    used = sorted({bucket_of(v, bounds) for v in hist})
    units = plan_cost(hist, bounds, model) * rows_per_item
    steps_seen = n_items / items_per_step
    execute = units / steps_seen * horizon * model.unit_s if steps_seen else 0.0
    graphs = len(used) * model.graphs_per_shape
    compile_ = graphs * model.compile_s
    return {
        "name": name,
        "kind": kind,
        "boundaries": bounds,
        "buckets": len(bounds),
        "graphs": graphs,
        "padding_efficiency": real / computed if computed else 1.0,
        "predicted_execute": execute,
        "predicted_compile": compile_,
        "predicted_total": execute + compile_,
    }


def advise(
    lengths: list[int],
    *,
    batch: int,
    top: int,
    max_buckets: int = 8,
    grouped: bool = False,
    horizon: int | None = None,
    model: CostModel | None = None,
) -> dict[str, Any]:
    """The advice for a stream of sequence ``lengths`` batched ``batch`` at a time.

    Random batching pads each batch to its bucket, so the histogram is of batch maxima
    (consecutive chunks of ``batch`` lengths); grouped batching forms batches inside buckets,
    so it is of the sequence lengths. ``horizon`` is the number of steps to plan for (default:
    the steps the lengths make). Returns a dict: ``histogram_of``, ``per_k`` (one plan per K),
    ``best`` (the plan with the least predicted total), ``pow2``, ``max``, ``alternatives``
    (grouped batching and packing, with ``wins``), ``cost_model``, ``horizon``.
    """
    if max_buckets < 1:
        raise ValueError(f"--max-buckets must be at least 1, got {max_buckets}")
    if not lengths:
        raise ValueError("no lengths to advise on")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if max(lengths) > top:
        raise ValueError(f"length {max(lengths)} is longer than the maximum length {top}")
    model = model or CostModel(compile_s=COMPILE_PRIOR_STEPS * batch * CostModel().row(top))
    n_steps = max(1, len(lengths) // batch)
    horizon = horizon or n_steps
    maxima = [max(lengths[i:i + batch]) for i in range(0, n_steps * batch, batch)]
    seq_hist = histogram(lengths[: n_steps * batch])
    if grouped:
        hist, per_step, rows_per_item, of = seq_hist, float(batch), 1, "sequence lengths"
    else:
        hist, per_step, rows_per_item, of = histogram(maxima), 1.0, batch, "batch maxima"
    real = sum(lengths[: n_steps * batch])
    kw = {"items_per_step": per_step, "rows_per_item": rows_per_item, "horizon": horizon,
          "real": real}
    per_k = []
    for k in range(1, max_buckets + 1):
        bounds = optimal_buckets(hist, k, model, top=top)
        if per_k and len(bounds) < k:
            break  # no more distinct lengths to split on
        per_k.append(_plan(f"dp K={len(bounds)}", hist, bounds, model, kind="dp", **kw))
    best = min(per_k, key=lambda p: (p["predicted_total"], p["buckets"]))
    pow2 = _plan("pow2", hist, pow2_buckets(top), model, kind="pow2", **kw)
    pad_max = _plan("pad to max", hist, [top], model, kind="max", **kw)
    alternatives = []
    if not grouped:
        kb = best["buckets"]
        gb = optimal_buckets(seq_hist, kb, model, top=top)
        g = _plan(f"grouped batching, K={len(gb)}", seq_hist, gb, model, kind="grouped",
                  items_per_step=float(batch), rows_per_item=1, horizon=horizon, real=real)
        alternatives.append(g)
    eff = simulate_packing(lengths[: n_steps * batch], batch, top)
    real_per_step = sum(lengths[: n_steps * batch]) / n_steps
    packed_steps = real_per_step * horizon / (eff * batch * top)
    alternatives.append({
        "name": "packed", "kind": "packed", "boundaries": [top], "buckets": 1,
        "graphs": model.graphs_per_shape, "padding_efficiency": eff,
        "predicted_execute": packed_steps * batch * model.row(top) * model.unit_s,
        "predicted_compile": model.graphs_per_shape * model.compile_s,
    })
    alternatives[-1]["predicted_total"] = (
        alternatives[-1]["predicted_execute"] + alternatives[-1]["predicted_compile"]
    )
    for alt in alternatives:
        alt["wins"] = alt["predicted_total"] < best["predicted_total"]
    return {
        "histogram_of": of,
        "histogram": {str(k): v for k, v in hist.items()},
        "lengths": len(lengths),
        "batch": batch,
        "top": top,
        "grouped": grouped,
        "horizon": horizon,
        "cost_model": {
            "crossover": model.crossover,
            "unit_s": model.unit_s,
            "compile_s": model.compile_s,
            "graphs_per_shape": model.graphs_per_shape,
            "calibrated": model.calibrated,
            "units": "seconds" if model.calibrated else "relative (uncalibrated prior)",
        },
        "per_k": per_k,
        "best": best,
        "pow2": pow2,
        "max": pad_max,
        "alternatives": alternatives,
    }


def _annotated(run: Any) -> list[tuple[int, dict[str, Any]]]:
    """``(step, annotations)`` of the barrier steps annotated with ``seq_len`` and
    ``batch_max_len``, in step order."""
    n = len(run.steps)
    return sorted((i, a) for i, a in run.steps.annotations.items()
                  if 0 <= i < n and "seq_len" in a and "batch_max_len" in a)


def calibrate(run: Any, base: CostModel) -> CostModel:
    """Seconds per unit and per compiled graph from a run's steps (annotated ``seq_len``,
    ``rows``): unit_s from (wall - compile) over units, compile_s from compile seconds over
    compilations, graphs_per_shape from distinct graph ids over distinct shapes."""
    steps = run.steps
    walls, comp_s = steps.values("wall_s"), steps.values("compile_s")
    comp_n = steps.values("compile_count")
    ev = run.events
    sel = ev.indices("compile")
    graphs_by_step: dict[int, set[int]] = {}
    for step, key in zip(ev.step[sel].tolist(), ev.key[sel].tolist(), strict=True):
        graphs_by_step.setdefault(step, set()).add(key)
    units = exec_s = compile_s = 0.0
    compiles = 0
    graphs: set[int] = set()
    shapes: set[int] = set()
    for i, a in _annotated(run):
        seq_len, rows = a.get("seq_len"), a.get("rows")
        if not isinstance(seq_len, int) or not isinstance(rows, int):
            continue
        units += rows * base.row(seq_len)
        exec_s += max(0.0, float(walls[i] - comp_s[i]))
        compile_s += float(comp_s[i])
        compiles += int(comp_n[i])
        graphs |= graphs_by_step.get(i, set())
        shapes.add(seq_len)
    if units <= 0:
        return base
    per_graph = compile_s / compiles if compiles else 0.0
    gps = max(1.0, len(graphs) / len(shapes)) if shapes and graphs else 1.0
    return CostModel(crossover=base.crossover, unit_s=exec_s / units, compile_s=per_graph,
                     graphs_per_shape=gps, calibrated=True)


def advice_for_run(run: Any, *, max_buckets: int = 8, horizon: int | None = None) -> dict | None:
    """Bucket advice for a run whose steps carry ``seq_len`` and ``batch_max_len`` (and
    ``lengths``) annotations; ``None`` when they do not. Calibrated on the run's own compile and
    step times; ``horizon`` defaults to the run's steps."""
    steps = _annotated(run)
    if not steps:
        return None
    info = run.meta.info or {}
    lengths: list[int] = []
    for _i, a in steps:
        ls = a.get("lengths")
        if isinstance(ls, list) and ls:
            lengths += [int(v) for v in ls]
        else:
            lengths += [int(a["batch_max_len"])] * int(a.get("rows", 1))
    batch = int(info.get("batch") or steps[0][1].get("rows") or 1)
    top = int(info.get("max_len") or max(lengths))
    model = calibrate(run, cost_model_from_info(info))
    if not model.calibrated:
        model = CostModel(crossover=model.crossover,
                          compile_s=COMPILE_PRIOR_STEPS * batch * model.row(top))
    advice = advise(lengths, batch=batch, top=top, max_buckets=max_buckets,
                    grouped=info.get("batching") == "grouped",
                    horizon=horizon or len(run.steps), model=model)
    advice["run_policy"] = info.get("policy")
    return advice


def advice_if_recompiling(run: Any, sites: list | None = None) -> dict | None:
    """:func:`advice_for_run` for a run that keeps recompiling (a recompile finding: a site with
    two or more recompilations, see ``recompiles.py``) while its padded sequence length (the
    ``seq_len`` step annotation) took several values; ``None`` otherwise. This is the advice the
    text, JSON and HTML reports show. ``sites`` is the recompile analysis when already made."""
    shapes = {a["seq_len"] for _i, a in _annotated(run)}
    if len(shapes) < 2:
        return None
    if sites is None:
        sites = explain_recompiles(run)
    if not any(s.verdict == CHURN for s in sites):
        return None
    advice = advice_for_run(run)
    if advice is not None:
        advice["seq_len_values"] = len(shapes)
    return advice
