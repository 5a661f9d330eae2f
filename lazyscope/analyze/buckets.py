"""The padding advisor: which policy (pad to max, K buckets, a length-grouped sampler, packed
rows) processes a run's data fastest, end to end, over the run the user will do.

Contract (pure: no I/O, no printing; standard library and the model only):

* **Lengths** (:func:`lengths_from_run`, :class:`Lengths`). From a traced run, in this order:
  the ``lengths`` step annotation (every sequence's length: exact); the ``batch_max_len`` /
  ``seq_len`` annotations (each step's padded length); else **the run's own graphs**: each
  compilation records its graph's inputs (dtype and shape); among the user's graphs of one
  input layout, the dimension that varies most is the sequence length, the dimensions before it
  are the batch. A step's length is that of the graph it ran: the graph its ``execute`` events
  name when the backend records them, else the graph compiled in that step; steps that reused a
  graph of unknown length are counted like the known ones (said in ``Lengths.notes``). Without
  per-sequence lengths, the sequence-length distribution is estimated from the batch maxima:
  the maximum of B random lengths has CDF ``F(x)**B``, so ``F = F_max**(1/B)`` (said too). A
  dimension that grows at every compilation is an accumulation, not a length stream:
  :class:`NoLengths`.
* **Cost** (:class:`CostModel`): a padded row of length ``L`` costs ``L + L**2 / crossover``
  units (linear layers are linear in L, attention's scores quadratic; ``crossover`` is the
  length where both are equal, ``6 * dim + vocab / (2 * layers)`` for a GPT block, see
  :func:`cost_model_from_info`). Calibrated on a run (:func:`calibrate`): seconds per unit from
  the steps that compiled nothing (their median rate), seconds per compiled graph from what the
  compiling steps took beyond their rows, graphs per padded shape and graphs compiled once (a
  first step's) from its graphs. Without a run: relative units and a compile priced as
  :data:`COMPILE_PRIOR_STEPS` full batches.
* **Plans** (:class:`Plan`): each policy priced over the **horizon** (the user's run: ``horizon``
  steps of ``batch`` sequences; :data:`DEFAULT_HORIZON` unless given): the steps that data takes,
  their execution, the graphs it compiles (expected distinct padded lengths over the horizon),
  and the predicted real tokens per second. Candidates: pad to max, pad to the longest (the
  shapes keep coming), pow2, the exact optimal K buckets (:func:`optimal_buckets`, a dynamic
  programme over the histogram, for each K up to ``max_buckets``), the same with a
  length-grouped sampler (:func:`lazyscope.core.padding.group_batches`), and packed rows
  (:class:`lazyscope.core.padding.Packer`, simulated: the packer :mod:`lazyscope.data` uses) of a
  row length it picks. Each plan says what it changes: the collate, the sampler, the model
  (packing needs a document mask or ``position_ids`` the model honours).
* :func:`advise` ranks them (:class:`Advice`, best first); :func:`advice_for_run` does it for a
  traced run, calibrated on it; :func:`match_measured` sets a ``compare``'s measured numbers
  beside the predicted ones. Every result is a frozen dataclass with ``to_json()``.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from lazyscope.analyze.makers import (
    SEQUENCE_LABELS,
    data_task,
    loader_rows,
    more_than_padding,
    shape_maker,
    training_loader,
)
from lazyscope.analyze.memory import MemoryModel, fit_memory, user_graph_bytes
from lazyscope.analyze.parts import training_s
from lazyscope.analyze.recompiles import CHURN, SiteCompiles, explain_recompiles
from lazyscope.analyze.tokens import measured_tokens
from lazyscope.core.padding import (
    Policy,
    bucket_of,
    fixed_policy,
    group_batches,
    pow2_buckets,
    simulate_packing,
)
from lazyscope.core.units import NOT_MEASURED
from lazyscope.core.units import nbytes as units_nbytes
from lazyscope.model import EVENT_KINDS, OWNER_USER, Compile, Run
from lazyscope.model.info import Workload, run_info

#: without a measured run, one compile is priced as this many executions of a full-length batch
#: (measured on XLA:CPU with the tiny decoder: ~4.2 s per compile, ~0.22 s per step at max length)
COMPILE_PRIOR_STEPS = 20.0
DEFAULT_CROSSOVER = 1024.0
#: the run the advice plans for when not told: a long training run
DEFAULT_HORIZON = 100_000
#: steps that compiled nothing a run needs for its execution time to be calibrated on them
#: alone (a compiling step's other seconds are the new graph's, not its rows')
MIN_STEADY_CALIBRATION = 3
#: the longest length a run's graphs showed is rounded up to a multiple of this (where nothing
#: declares the data's longest): the TPU's tile, and room for the data's longer sequences
TILE = 8
#: packed row lengths tried, as multiples of the longest length
PACKED_ROW_MULTIPLES = (1, 2, 4)
#: per-sequence lengths drawn from an estimated distribution
ESTIMATE_SAMPLES = 4096
#: sequences the length-grouping and packing simulations run on, at most (the first)
SIMULATION_LIMIT = 100_000

MODEL_CHANGE_PACKED = ("the model must keep the documents of a row apart: a document-causal "
                       "attention mask from document_ids (SDPA attn_mask, or a FlexAttention "
                       "BlockMask) and position_ids restarting at each document (Hugging Face "
                       "models: position_ids and no attention_mask)")


class NoLengths(ValueError):
    """The run holds no stream of sequence lengths to advise on; the message says why."""


# ------------------------------------------------------------------------------ cost model


_NO_JSON = {"json": False}


@dataclass(frozen=True)
class CostModel:
    """Predicted cost of padded rows. ``unit_s``/``compile_s`` are seconds when calibrated,
    otherwise relative (``unit_s`` = 1, ``compile_s`` = COMPILE_PRIOR_STEPS full batches)."""

    crossover: float = DEFAULT_CROSSOVER
    unit_s: float = 1.0
    compile_s: float = 0.0
    graphs_per_shape: float = 1.0
    calibrated: bool = False
    #: graphs compiled once whatever the shapes (a first step without optimizer state yet):
    #: added to every plan, never multiplied by its shapes
    extra_graphs: float = 0.0
    #: the run's first graphs (its first shape's and the once-only ones, ``first_graphs`` of
    #: them) and the seconds they took: a process's first compilations cost more than its later
    #: ones (the compiler's warm-up, the optimizer's state built in the first steps' graphs),
    #: and every plan pays them; ``compile_s`` is then a later graph's (0: not calibrated so)
    first_graphs: float = 0.0
    first_s: float = 0.0

    def compile_cost(self, graphs: float) -> float:
        """Seconds (or relative units) to compile ``graphs`` graphs in a fresh process: the
        first ones at what the run's first ones took, the rest at ``compile_s`` each."""
        if self.first_graphs <= 0:
            return graphs * self.compile_s
        first = min(graphs, self.first_graphs)
        return (self.first_s * first / self.first_graphs
                + max(0.0, graphs - self.first_graphs) * self.compile_s)

    def row(self, length: int) -> float:
        """Units for one row padded to ``length``: a linear term plus attention's quadratic one."""
        return length + length * length / self.crossover

    JSON_EXTRA: ClassVar[dict[str, str]] = {"units": "units"}

    @property
    def units(self) -> str:
        """What ``unit_s`` and ``compile_s`` are in."""
        return "seconds" if self.calibrated else "relative (uncalibrated prior)"


def cost_model_from_info(info: dict[str, Any]) -> CostModel:
    """:func:`cost_model` of the dims in a ``meta.json`` ``info`` (``dim``, ``layers``,
    ``vocab``)."""
    return cost_model(run_info(info).workload)


def cost_model(work: Workload) -> CostModel:
    """A model whose quadratic term matches the decoder's dims (``dim``, ``vocab`` in info).

    Per token a block does ~12*dim^2 multiply-adds in linear layers and the LM head dim*vocab;
    per pair of tokens attention does 2*dim per layer: crossover = (12*dim^2*layers + dim*vocab)
    / (2*dim*layers) = 6*dim + vocab/(2*layers).
    """
    if work.dim is None:
        crossover = DEFAULT_CROSSOVER
    else:
        layers = work.layers if work.layers is not None else 1.0
        crossover = work.dim * 6 + (work.vocab or 0.0) / (2 * max(layers, 1.0))
    return CostModel(crossover=crossover if crossover > 0 else DEFAULT_CROSSOVER)


def prior_model(base: CostModel, batch: int, top: int) -> CostModel:
    """The uncalibrated model: relative units, a compile priced as COMPILE_PRIOR_STEPS full
    batches."""
    return CostModel(crossover=base.crossover,
                     compile_s=COMPILE_PRIOR_STEPS * batch * base.row(top))


# ------------------------------------------------------------------------------ histograms


def histogram(values: Iterable[int]) -> dict[int, int]:
    """``{length: count}``, sorted by length."""
    return dict(sorted(Counter(int(v) for v in values).items()))


def plan_cost(hist: dict[int, float], boundaries: list[int], model: CostModel) -> float:
    """Units spent padding every item of ``hist`` to its bucket."""
    return sum(c * model.row(bucket_of(v, boundaries)) for v, c in hist.items())


def padding_efficiency(hist: dict[int, int], boundaries: list[int]) -> float:
    """Real / computed tokens when each item is padded to its bucket (items = rows)."""
    real = sum(v * c for v, c in hist.items())
    computed = sum(bucket_of(v, boundaries) * c for v, c in hist.items())
    return real / computed if computed else 1.0


def optimal_buckets(
    hist: dict[int, float], k: int, model: CostModel | None = None, top: int | None = None
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
    prefix = [0.0]
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
        if best[n - 1] < result_cost * (1 - 1e-12):  # strict: ties keep fewer buckets
            result_cost, result_k = best[n - 1], kk
    bounds = []
    j = n - 1
    for kk in range(result_k, 0, -1):
        bounds.append(values[j])
        j = choice[kk - 1][j] if kk > 1 else -1
    return sorted(bounds)


# ------------------------------------------------------------------------------ lengths


@dataclass(frozen=True)
class SequenceStats:
    """A length stream in a few numbers (the advice JSON's ``sequences``)."""

    count: int
    mean: float
    median: int
    p90: int
    p99: int
    max: int


@dataclass(frozen=True)
class Lengths:
    """What the advisor knows of a stream of sequence lengths.

    ``sequences``: per-sequence lengths in stream order (exact, or drawn from the distribution
    estimated from the batch maxima: ``exact`` False). ``maxima``: each step's padded length
    (the batch maximum) when known, else empty (then batches are simulated from
    ``sequences``). ``top``: the longest length any policy must fit. ``source``: where they come
    from (``annotations``, ``graph inputs``, ``file``, ``planned``); ``what``: the tensor
    dimension or annotation read; ``steps`` / ``steps_known``: the run's steps and those whose
    length is known."""

    sequences: tuple[int, ...] = field(metadata=_NO_JSON)
    batch: int
    top: int
    source: str
    exact: bool = True
    maxima: tuple[int, ...] = field(default=(), metadata=_NO_JSON)
    what: str = ""
    steps: int = 0
    steps_known: int = 0
    grouped: bool = False
    notes: tuple[str, ...] = ()

    @property
    def mean(self) -> float:
        return sum(self.sequences) / len(self.sequences) if self.sequences else 0.0

    def summary(self) -> dict[str, Any]:
        s = sorted(self.sequences)

        def q(p: float) -> int:
            return s[min(len(s) - 1, int(p * len(s)))] if s else 0

        return {"count": len(s), "mean": round(self.mean, 2), "median": q(0.5), "p90": q(0.9),
                "p99": q(0.99), "max": s[-1] if s else 0}

    #: the JSON's ``sequences`` (their count, mean and quantiles) and ``batch_maxima`` (a
    #: histogram), in place of the streams
    JSON_EXTRA: ClassVar[dict[str, str]] = {"sequences": "sequence_stats",
                                            "batch_maxima": "batch_maxima"}

    @property
    def sequence_stats(self) -> SequenceStats:
        return SequenceStats(**self.summary())

    @property
    def batch_maxima(self) -> dict[str, int]:
        return {str(k): v for k, v in histogram(self.maxima).items()}


def estimate_sequences(maxima: Sequence[int], batch: int,
                       n: int = ESTIMATE_SAMPLES, mean: float | None = None) -> list[int]:
    """``n`` sequence lengths drawn (as quantiles, then shuffled with a fixed seed) from the
    distribution whose batch-of-``batch`` maxima are ``maxima``: ``F(x) = F_max(x)**(1/batch)``,
    spread uniformly between consecutive observed maxima, and from 1 up to the smallest; the
    maxima say nothing of that lowest part (most of the sequences: F at the smallest maximum
    is ``(1/len(maxima))**(1/batch)``, 0.68 for 23 batches of 8), so with ``mean`` (the real
    tokens a sequence the run measured) it is spread from the length that makes the mean
    ``mean`` instead of from 1."""
    if not maxima:
        return []
    hist = histogram(maxima)
    total = len(maxima)
    knots = [(0.0, 0.0)]  # (length, CDF) with linear interpolation between knots
    acc = 0
    for v, c in hist.items():
        acc += c
        knots.append((float(v), (acc / total) ** (1.0 / max(1, batch))))
    if mean is not None and mean > 0 and len(knots) > 1:
        low, f_low = knots[1]
        # the mean of the part above the smallest maximum, as the knots spread it
        above = sum((f1 - f0) * (x0 + x1) / 2
                    for (x0, f0), (x1, f1) in zip(knots[1:], knots[2:], strict=False))
        start = 2 * (mean - above) / f_low - low if f_low > 0 else 0.0
        knots[0] = (min(max(0.0, start), low), 0.0)
    out = []
    j = 1
    for i in range(n):
        q = (i + 0.5) / n
        while knots[j][1] < q:
            j += 1
        (x0, f0), (x1, f1) = knots[j - 1], knots[j]
        x = x1 if f1 <= f0 else x0 + (x1 - x0) * (q - f0) / (f1 - f0)
        out.append(max(1, min(int(x1), math.ceil(x))))
    random.Random(0).shuffle(out)
    return out


def _annotated_lengths(run: Run) -> Lengths | None:
    """Lengths from the step annotations: ``lengths`` (exact) or ``batch_max_len``/``seq_len``."""
    n = len(run.steps)
    ann = sorted((i, a) for i, a in run.steps.annotations.items() if 0 <= i < n)
    exact = [(i, a["lengths"]) for i, a in ann
             if isinstance(a.get("lengths"), list) and a["lengths"]]
    work = run.meta.run_info.workload
    batch = work.batch or 0
    if exact:
        seqs = [int(v) for _, ls in exact for v in ls]
        sizes = {len(ls) for _, ls in exact}
        batch = batch or round(len(seqs) / len(exact))
        top = work.max_len or max(seqs)
        # the run's own batches when each step held one batch of sequences; packed steps hold
        # a varying number: batches of `batch` consecutive sequences are simulated
        maxima = ([max(ls) for _, ls in exact] if sizes == {batch}
                  else _random_maxima(seqs, batch))
        return Lengths(tuple(seqs), batch, top, "annotations", True, tuple(maxima),
                       "the lengths step annotation", n, len(exact),
                       work.batching == "grouped")
    maxima_ann = [(i, a.get("batch_max_len", a.get("seq_len"))) for i, a in ann]
    maxima = [int(m) for _, m in maxima_ann if isinstance(m, int) and m > 0]
    if not maxima:
        return None
    batch = batch or int(next((a["rows"] for _, a in ann if isinstance(a.get("rows"), int)), 1))
    top = work.max_len or max(maxima)
    return Lengths(tuple(estimate_sequences(maxima, batch)), batch, top, "annotations", False,
                   tuple(maxima), "the batch_max_len step annotation", n, len(maxima),
                   notes=(f"per-sequence lengths estimated from {len(maxima)} batch maxima "
                          f"(F = F_max^(1/{batch}), random batches assumed)",))


@dataclass(frozen=True)
class GraphLengths:
    """The varying dimension of a run's graphs: ``by_graph`` (graph id -> length),
    ``by_step`` (step -> length, for the steps whose graph is known), the batch, and the input
    it was read from (``what``)."""

    by_graph: dict[str, int]
    by_step: dict[int, int]
    batch: int
    what: str
    source_of_steps: str


def _user_graphs(run: Run) -> list[tuple[int, str, Compile]]:
    """(step, graph id, payload) of the user's compiled graphs that record their inputs."""
    out = []
    for e in run.events.iter("compile"):
        data = e.data
        if not isinstance(data, Compile) or data.inputs is None or data.owner != OWNER_USER:
            continue
        if data.phase == "backward":
            continue
        out.append((e.step, e.key, data))
    return out


def graph_lengths(run: Run, rows: int | None = None) -> GraphLengths:
    """The sequence-length dimension of the run's graphs (see the module docstring); raises
    :class:`NoLengths` saying why there is none. ``rows``: the batch the training step's loader
    makes (its graphs are those with an input of that many rows, when any has)."""
    graphs = _user_graphs(run)
    if rows is not None:  # an evaluation loader's graphs (other rows) are not the step's
        graphs = [g for g in graphs if any(len(i.shape) >= 2 and i.shape[0] == rows
                                           for i in (g[2].inputs or []))] or graphs
    if not graphs:
        raise NoLengths("the run recorded no graph inputs (trace it with graph shapes on, the "
                        "default on XLA) and no lengths annotations")
    layouts: dict[tuple[tuple[str, int], ...], list[tuple[int, str, Compile]]] = {}
    for g in graphs:
        inputs = g[2].inputs or []
        layouts.setdefault(tuple((i.dtype, len(i.shape)) for i in inputs), []).append(g)

    def variety(group: list[tuple[int, str, Compile]]) -> int:
        return len({tuple(tuple(i.shape) for i in (g[2].inputs or [])) for g in group})

    group = max(layouts.values(), key=lambda gs: (variety(gs), len(gs)))
    if variety(group) < 2:
        raise NoLengths("no dimension of the run's graph inputs varies: every step ran "
                        "graphs of the same shapes (nothing to pad differently)")
    inputs0 = group[0][2].inputs or []
    candidates = []
    for p, inp in enumerate(inputs0):
        for d in range(len(inp.shape)):
            values = [(g[2].inputs or [])[p].shape[d] for g in group]
            distinct = len(set(values))
            if distinct > 1:
                integer = inp.dtype.startswith(("s", "u", "i"))
                candidates.append((distinct, integer, max(values), -p, -d, p, d))
    candidates.sort(reverse=True)
    _, _, _, _, _, p, d = candidates[0]
    by_graph: dict[str, int] = {}
    batches = []
    first: dict[str, int] = {}
    for step, key, data in group:
        shape = (data.inputs or [])[p].shape
        by_graph.setdefault(key, int(shape[d]))
        first.setdefault(key, step)
        batches.append(math.prod(shape[:d]) if d else 1)
    inp = inputs0[p]
    sig = ",".join("?" if i == d else str(x) for i, x in enumerate(inp.shape))
    what = f"dim {d} of the {inp.dtype}[{sig}] input"
    ordered = sorted(first.items(), key=lambda kv: kv[1])
    seq = [by_graph[k] for k, _ in ordered]
    steps = [s for _, s in ordered]
    if len(seq) >= 4 and all(b > a for a, b in zip(seq, seq[1:], strict=False)) and \
            all(t - s == 1 for s, t in zip(steps, steps[1:], strict=False)):
        raise NoLengths(f"{what} grows at every step ({seq[0]} -> {seq[-1]} over "
                        f"{len(seq)} steps): the program accumulates a tensor, which padding "
                        "does not fix (keep its size fixed instead)")
    by_step, source = _lengths_by_step(run, by_graph)
    return GraphLengths(by_graph, by_step, max(batches) if batches else 1, what, source)


def _lengths_by_step(run: Run, by_graph: dict[str, int]) -> tuple[dict[int, int], str]:
    """step -> the length of the graph it ran: from ``execute`` events when the backend records
    them (a graph id per execution), else from the graphs compiled in that step."""
    kind = "execute" if "execute" in EVENT_KINDS else "compile"
    ev = run.events
    if kind == "execute" and ev.count("execute") == 0:
        kind = "compile"
    sel = ev.indices(kind)
    out: dict[int, int] = {}
    for step, kid in zip(ev.step[sel].tolist(), ev.key[sel].tolist(), strict=True):
        length = by_graph.get(ev.key_of(kid))
        if length is not None:
            out[int(step)] = max(out.get(int(step), 0), length)
    return out, ("executions" if kind == "execute" else "compilations")


def _step_rows(run: Run) -> int | None:
    """The rows of the batches the loader that feeds the training step made (an evaluation
    loader's are not the step's), when the run recorded its loaders."""
    return loader_rows(training_loader(run.meta.run_info.loaders))


def lengths_from_run(run: Run, *, top: int | None = None) -> Lengths:
    """The run's length stream (module docstring); :class:`NoLengths` when it has none."""
    info = run.meta.run_info
    found = _annotated_lengths(run)
    if found is not None:
        if top is not None:
            found = replace(found, top=max(top, max(found.sequences)))
        return found
    rows = _step_rows(run)
    g = graph_lengths(run, rows)
    n = len(run.steps)
    known = {s: v for s, v in g.by_step.items() if 0 <= s < n}
    maxima = [known[s] for s in sorted(known)]
    notes = []
    if n > len(known):
        notes.append(f"{len(known)} of {n} steps ran a graph whose length is known (it was "
                     f"compiled in that step); the other {n - len(known)} reused a graph and "
                     "are counted like the known ones")
    batch = info.workload.batch or rows or g.batch or 1
    notes.append(f"per-sequence lengths estimated from {len(maxima)} padded batch lengths "
                 f"(F = F_max^(1/{batch}), random batches assumed; annotate_step(lengths=...) "
                 "makes them exact)")
    longest = max(maxima) if maxima else max(g.by_graph.values())
    # the loader works ahead of the steps: the longest batch it made may be longer than any
    # the steps ran, and a plan must hold it
    maker = shape_maker(sorted(set(maxima)), info.loaders)
    if maker is not None and maker.sizes and max(maker.sizes) > longest:
        notes.append(f"the max length is the longest batch the loader made ({max(maker.sizes)}, "
                     f"in {maker.batches} batches), longer than any step ran ({longest})")
        longest = max(maker.sizes)
    declared = info.workload.max_len or 0
    if longest % TILE and longest > declared:
        # a run sees a sample of its data: the longest it saw is rarely the data's longest, and
        # a batch longer than every bucket is a shape (a graph) of its own
        notes.append(f"the longest length the run saw ({longest}) is rounded up to a multiple "
                     f"of {TILE} ({longest + TILE - longest % TILE}): the data's longest may be "
                     f"longer than the run's sample showed, and TPUs tile by {TILE}")
        longest += TILE - longest % TILE
    tokens = measured_tokens(run)
    mean = tokens.real / (tokens.steps * batch) if tokens is not None and tokens.steps else None
    if mean is not None:
        notes.append(f"the lengths below the shortest batch maximum are spread so that the "
                     f"mean is the {mean:.1f} real tokens a sequence the run measured "
                     f"({tokens.source if tokens is not None else ''})")
    return Lengths(tuple(estimate_sequences(maxima, batch, mean=mean)), batch,
                   max(top or 0, info.workload.max_len or 0, longest), "graph inputs", False,
                   tuple(maxima), g.what, n, len(known), notes=tuple(notes))


# ------------------------------------------------------------------------------ plans


@dataclass(frozen=True)
class Plan:
    """One policy, priced over the horizon's data (``horizon`` steps of ``batch`` sequences).

    ``steps``: the steps that data takes (packing needs fewer); ``graphs``: the compiled graphs
    expected (distinct padded shapes over the horizon x graphs per shape); ``execute_s``,
    ``compile_s``, ``total_s``: predicted, seconds when the model is calibrated (else relative
    units); ``tokens_per_s``: real tokens over ``total_s``. ``changes``: what the user changes
    (``collate``, ``sampler``, ``model``); ``model_change``: what the model must accept, or
    ``""``."""

    name: str
    policy: Policy = field(metadata=_NO_JSON)
    graphs: float = field(metadata={"round": 3})
    padding_efficiency: float = field(metadata={"round": 4})
    steps: float = field(metadata={"round": 1})
    execute_s: float = field(metadata={"name": "predicted_execute"})
    compile_s: float = field(metadata={"name": "predicted_compile"})
    total_s: float = field(metadata={"name": "predicted_total"})
    tokens_per_s: float = field(metadata={"name": "predicted_tokens_per_s"})
    changes: tuple[str, ...] = ()
    model_change: str = ""
    #: the predicted bytes of its largest graph (its largest padded shape, ``largest``, through
    #: the run's :class:`~lazyscope.analyze.memory.MemoryModel`); None: not measured
    graph_bytes: int | None = field(default=None, metadata={"name": "predicted_graph_memory",
                                                            "omit_none": True})
    #: whether that graph fits the ``--device-memory`` given; None: none given, or not measured
    fits: bool | None = field(default=None, metadata={"omit_none": True})

    #: the policy, as the JSON writes it: its label and its parts
    JSON_EXTRA: ClassVar[dict[str, str]] = {
        "policy": "policy_label", "kind": "kind", "boundaries": "boundaries", "rows": "rows",
        "row_len": "row_len", "grouped": "grouped"}

    @property
    def policy_label(self) -> str:
        return self.policy.label()

    @property
    def kind(self) -> str:
        return self.policy.kind

    @property
    def rows(self) -> int | None:
        return self.policy.rows

    @property
    def row_len(self) -> int | None:
        return self.policy.row_len

    @property
    def grouped(self) -> bool:
        return self.policy.grouped

    @property
    def boundaries(self) -> list[int]:
        return list(self.policy.boundaries)

    @property
    def buckets(self) -> int:
        return len(self.policy.boundaries)



@dataclass(frozen=True)
class Measured:
    """A ``lazyscope compare`` row set beside the plan it ran: measured real tokens/s (compile
    included) and compiles, against the plan's prediction for the same number of steps."""

    policy: str
    plan: str
    steps: int
    compiles: int
    padding_efficiency: float | None
    tokens_per_s: float
    predicted_tokens_per_s: float
    predicted_graphs: float
    predicted_padding_efficiency: float
    #: the run's largest compiled graph (measured) and the plan's prediction, in bytes
    graph_memory: int | None = field(default=None, metadata={"omit_none": True})
    predicted_graph_memory: int | None = field(default=None, metadata={"omit_none": True})



@dataclass(frozen=True)
class Advice:
    """The advisor's answer: ``plans`` ranked by predicted total time over ``horizon`` steps
    (best first), the exact K-bucket table (``per_k``, random batches), the policy the run used
    (``run_policy``) and, from a ``compare`` of the same workload, ``measured`` rows."""

    lengths: Lengths
    horizon: int
    horizon_from: str
    cost_model: CostModel
    plans: tuple[Plan, ...]
    per_k: tuple[Plan, ...]
    packing: bool = True
    run_policy: str | None = None
    seq_len_values: int | None = None
    measured: tuple[Measured, ...] = ()
    compared: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: what the data is, from the run's loader (``makers.SEQUENCE_LABELS`` ...; "" unknown)
    task: str = ""
    #: the collate function of the loader that feeds the run's training step (its description,
    #: :func:`~lazyscope.analyze.makers.data_task`), if the run recorded it: the code wraps it
    #: (``lazyscope.data.Bucketed``), never replaces it
    collator: dict[str, Any] | None = None
    #: plans left out of the ranking: each pads every batch as a ranked plan does (a
    #: ``compare`` row that ran one is still set beside its prediction)
    same_shapes: tuple[Plan, ...] = field(default=(), metadata=_NO_JSON)
    #: each plan's largest graph against its padded length, from the run's own graphs; None:
    #: not measured (``memory_note`` says why)
    memory: MemoryModel | None = field(default=None, metadata={"omit_none": True})
    memory_note: str = field(default="", metadata={"omit_empty": True})
    #: ``--device-memory``: the bytes a graph may hold; the plans whose largest graph would
    #: not fit are ``ruled_out`` (never ranked, never recommended, never emitted)
    device_memory: int | None = field(default=None, metadata={"omit_none": True})
    ruled_out: tuple[Plan, ...] = field(default=(), metadata={"omit_empty": True})

    JSON_EXTRA: ClassVar[dict[str, str]] = {
        "recommended": "recommended", "best_without_model_change": "best_without_model_change"}

    @property
    def recommended(self) -> Plan:
        return self.plans[0]

    @property
    def best_without_model_change(self) -> Plan | None:
        """The best plan the model need not change for; None when every such plan was ruled
        out (``--device-memory``)."""
        return next((p for p in self.plans if not p.model_change), None)

    @property
    def best_buckets(self) -> Plan:
        """The best K-bucket plan for the run's batching (``bucket:auto``)."""
        kinds = [p for p in self.plans if p.policy.kind in ("buckets", "max")
                 and p.policy.grouped == self.lengths.grouped and not p.name.startswith("pow2")]
        return kinds[0] if kinds else min(self.per_k, key=lambda p: p.total_s)

    def plan_named(self, name: str) -> Plan | None:
        return next((p for p in (*self.plans, *self.per_k, *self.same_shapes, *self.ruled_out)
                     if p.name == name), None)


class NothingFits(ValueError):
    """Every policy's largest graph is over the ``--device-memory`` given; the message says
    the smallest."""


def largest_shape(policy: Policy, batch: int, top: int) -> tuple[int, int]:
    """``(rows, length)`` of the largest batch ``policy`` pads to: packed rows x row_len; pad
    to longest, the longest length (``top``: pass the longest sequence); buckets and pad to
    max, the largest bucket."""
    if policy.packed and policy.rows and policy.row_len:
        return policy.rows, policy.row_len
    if policy.kind == "longest" or not policy.boundaries:
        return batch, top
    return batch, max(policy.boundaries)


def with_memory(plan: Plan, memory: MemoryModel | None, batch: int, top: int,
                device_memory: int | None) -> Plan:
    """``plan`` with its largest graph's predicted bytes and whether it fits."""
    if memory is None:
        return plan
    rows, length = largest_shape(plan.policy, batch, top)
    need = memory.bytes_at(length, rows)
    return replace(plan, graph_bytes=need,
                   fits=None if device_memory is None else need <= device_memory)


def _expected_distinct(probs: Iterable[float], horizon: float) -> float:
    """Expected number of distinct outcomes in ``horizon`` draws with these probabilities."""
    return float(sum(1.0 - (1.0 - p) ** horizon for p in probs if p > 0))


def _normalised(hist: dict[int, int]) -> dict[int, float]:
    total = sum(hist.values())
    return {k: v / total for k, v in hist.items()} if total else {}


@dataclass(frozen=True)
class _Ctx:
    model: CostModel
    batch: int
    horizon: int
    mean: float
    top: int

    @property
    def real(self) -> float:
        """Real tokens in the horizon's data."""
        return self.horizon * self.batch * self.mean


def _padded_plan(name: str, policy: Policy, maxima: dict[int, float], ctx: _Ctx,
                 changes: tuple[str, ...], shapes_of: dict[int, float] | None = None) -> Plan:
    """A padding plan: each step's batch padded to ``policy``'s length for its maximum.
    ``shapes_of``: the maxima distribution the distinct shapes are counted on (default
    ``maxima``)."""
    model = ctx.model
    units = sum(p * ctx.batch * model.row(policy.padded_length(m)) for m, p in maxima.items())
    padded = sum(p * policy.padded_length(m) for m, p in maxima.items())
    shapes: dict[int, float] = {}
    for m, p in (shapes_of or maxima).items():
        shapes[policy.padded_length(m)] = shapes.get(policy.padded_length(m), 0.0) + p
    graphs = (_expected_distinct(shapes.values(), ctx.horizon) * model.graphs_per_shape
              + model.extra_graphs)
    execute = ctx.horizon * units * model.unit_s
    compile_ = model.compile_cost(graphs)
    total = execute + compile_
    return Plan(name, policy, graphs, ctx.mean / padded if padded else 1.0, float(ctx.horizon),
                execute, compile_, total, ctx.real / total if total > 0 else 0.0, changes)


def _packed_plan(sequences: list[int], rows: int, row_len: int, ctx: _Ctx,
                 steps: float | None = None) -> Plan:
    """Packed rows for the horizon's data, or for ``steps`` packed steps (what a compare runs:
    the same number of steps, more data)."""
    model = ctx.model
    eff = simulate_packing(sequences, rows, row_len)
    real = ctx.real if steps is None else steps * rows * row_len * eff
    steps = real / (rows * row_len * eff)
    execute = steps * rows * model.row(row_len) * model.unit_s
    graphs = model.graphs_per_shape + model.extra_graphs
    compile_ = model.compile_cost(graphs)
    total = execute + compile_
    return Plan(f"packed {rows}x{row_len}", Policy("packed", (row_len,), rows=rows,
                                                    row_len=row_len),
                graphs, eff, steps, execute, compile_, total,
                real / total if total > 0 else 0.0,
                ("sampler", "collate", "model"), MODEL_CHANGE_PACKED)


def _random_maxima(sequences: Sequence[int], batch: int) -> list[int]:
    return [max(sequences[i:i + batch]) for i in range(0, len(sequences) - batch + 1, batch)]


def _bootstrap_maxima(sequences: Sequence[int], batch: int,
                      n: int = ESTIMATE_SAMPLES) -> list[int]:
    """The maxima of ``n`` batches of ``batch`` sequences drawn (seeded, with replacement) from
    ``sequences``."""
    rng = random.Random(0)
    return [max(rng.choices(sequences, k=batch)) for _ in range(n)]


def _longest_shapes(sim: list[int], seqs: list[int], batch: int,
                    grouped: bool) -> dict[int, float]:
    """The distribution of the shapes pad to longest makes: the maxima of many batches drawn
    from the sequences (grouped: length-grouped batches of ``sim``), whose support is wider
    than the few maxima a run observed."""
    return _normalised(histogram(_grouped_maxima(sim, batch) if grouped
                                 else _bootstrap_maxima(seqs, batch)))


def _rank(plans: Iterable[Plan]) -> list[Plan]:
    """Best first: the least predicted total time, then the fewest graphs, then by name."""
    return sorted(plans, key=lambda p: (p.total_s, p.graphs, p.name))


def _grouped_maxima(sequences: Sequence[int], batch: int) -> list[int]:
    batches = group_batches(sequences, batch, random.Random(0))
    return [max(sequences[i] for i in b) for b in batches if len(b) == batch]


def advise(
    lengths: Lengths | Sequence[int],
    *,
    batch: int | None = None,
    top: int | None = None,
    max_buckets: int = 8,
    grouped: bool = False,
    horizon: int | None = None,
    model: CostModel | None = None,
    packing: bool = True,
    horizon_from: str | None = None,
    memory: MemoryModel | None = None,
    device_memory: int | None = None,
) -> Advice:
    """Rank the policies for a length stream (a :class:`Lengths`, or a plain list of sequence
    lengths with ``batch`` and ``top``) over ``horizon`` steps (default
    :data:`DEFAULT_HORIZON`). ``grouped``: the stream's batches are already length-grouped.
    ``packing=False`` leaves packed rows out (a model that cannot take a document mask).
    ``model``: a calibrated :class:`CostModel` (default: the uncalibrated prior).
    ``memory``: the run's graph bytes against the padded length: each plan's largest graph
    predicted; with ``device_memory`` (bytes), the plans whose largest graph would not fit are
    ruled out (:class:`NothingFits` when none fits)."""
    if max_buckets < 1:
        raise ValueError(f"--max-buckets must be at least 1, got {max_buckets}")
    if not isinstance(lengths, Lengths):
        values = [int(v) for v in lengths]
        if not values:
            raise ValueError("no lengths to advise on")
        if batch is None or batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        top = top or max(values)
        if max(values) > top:
            raise ValueError(f"length {max(values)} is longer than the maximum length {top}")
        n_steps = max(1, len(values) // batch)
        lengths = Lengths(tuple(values), batch, top, "file", True,
                          tuple(_random_maxima(values, batch)) if not grouped else (),
                          steps=n_steps, steps_known=n_steps, grouped=grouped)
    if not lengths.sequences:
        raise ValueError("no lengths to advise on")
    batch, top = lengths.batch, lengths.top
    if horizon is not None and horizon < 1:
        raise ValueError(f"--horizon must be at least 1, got {horizon}")
    if horizon_from is None:
        horizon_from = "given" if horizon else "default: a long training run"
    horizon = horizon or DEFAULT_HORIZON
    model = model or prior_model(CostModel(), batch, top)
    seqs = list(lengths.sequences)
    # the simulations (length grouping, packing) run on at most SIMULATION_LIMIT sequences
    sim = seqs[:SIMULATION_LIMIT]
    ctx = _Ctx(model, batch, horizon, lengths.mean, top)

    too_big: list[Plan] = []
    longest = max(seqs)

    def mem(p: Plan) -> Plan:
        return with_memory(p, memory, batch, top if p.policy.kind != "longest" else longest,
                           device_memory)

    maxima_list = list(lengths.maxima) or (
        _grouped_maxima(sim, batch) if lengths.grouped else _random_maxima(seqs, batch))
    if not maxima_list:
        maxima_list = [max(seqs)]
    maxima = _normalised(histogram(maxima_list))
    collate = ("collate",)
    per_k: list[Plan] = []
    for k in range(1, max_buckets + 1):
        bounds = optimal_buckets(maxima, k, model, top=top)
        if per_k and len(bounds) < k:
            break  # no more distinct lengths to split on
        per_k.append(mem(_padded_plan(f"{len(bounds)} bucket{'s' if len(bounds) > 1 else ''}",
                                      Policy("buckets", tuple(bounds), grouped=lengths.grouped),
                                      maxima, ctx, collate)))
    plans = [
        _padded_plan("pad to max", Policy("max", (top,), grouped=lengths.grouped), maxima, ctx,
                     collate),
        # its shapes keep coming: counted on the maxima of many batches drawn from the
        # sequences, whose support is wider than the few observed
        _padded_plan("pad to longest", Policy("longest", grouped=lengths.grouped), maxima, ctx,
                     collate, _longest_shapes(sim, seqs, batch, lengths.grouped) or maxima),
        _padded_plan("pow2", Policy("buckets", tuple(pow2_buckets(top)),
                                    grouped=lengths.grouped), maxima, ctx, collate),
    ]
    best_k = min(per_k, key=lambda p: (p.total_s, p.buckets))
    if best_k.buckets > 1:
        plans.append(best_k)
    if not lengths.grouped:
        gmax = _normalised(histogram(_grouped_maxima(sim, batch) or maxima_list))
        best_g = None
        for k in range(1, max_buckets + 1):
            bounds = optimal_buckets(gmax, k, model, top=top)
            p = _padded_plan(f"{len(bounds)} bucket{'s' if len(bounds) > 1 else ''}, "
                             "length-grouped",
                             Policy("buckets", tuple(bounds), grouped=True), gmax, ctx,
                             ("sampler", "collate"))
            if best_g is None or p.total_s < best_g.total_s:
                best_g = p
            if len(bounds) < k:
                break
        if best_g is not None and best_g.buckets > 1:
            # one length-grouped bucket is pad to max: the same shapes, never ranked above it
            plans.append(best_g)
    if packing:
        packed = []
        for mult in PACKED_ROW_MULTIPLES:
            row_len = top * mult
            rows = max(1, round(batch / mult))
            if mult > 1 and rows * mult != batch:
                continue
            packed.append(mem(_packed_plan(sim, rows, row_len, ctx)))
        # the fastest row length that fits (all of them shown ruled out when none does)
        fitting = [p for p in packed if p.fits is not False]
        plans.append(min(fitting or packed, key=lambda p: p.total_s))
        too_big = [p for p in packed if p.fits is False and p not in plans]
    plans = _rank(mem(p) for p in plans)
    kept, notes = _distinct_plans(plans, set(maxima) | set(maxima_list))
    ruled_out = tuple(_rank([*(p for p in kept if p.fits is False), *too_big]))
    fit = [p for p in kept if p.fits is not False]
    if not fit:
        small = min(ruled_out, key=lambda p: (p.graph_bytes or 0))
        raise NothingFits(
            f"no policy fits in {units_nbytes(device_memory)} of device memory: the smallest "
            f"largest graph is {small.name}'s, {units_nbytes(small.graph_bytes)}")
    return Advice(lengths, horizon, horizon_from, model, tuple(fit), tuple(per_k),
                  packing=packing, notes=tuple(notes),
                  same_shapes=tuple(p for p in plans if p not in kept), memory=memory,
                  device_memory=device_memory if memory is not None else None,
                  ruled_out=ruled_out)


def _distinct_plans(plans: list[Plan], maxima: set[int]) -> tuple[list[Plan], list[str]]:
    """The ranked plans less those that pad every batch maximum seen to the same length as a
    plan ranked before them (pow2 whose only bucket above the data is the maximum is pad to
    max): the same shapes, the same run, never two ranks; a note says which."""
    kept: list[Plan] = []
    notes: list[str] = []
    seen: dict[Any, Plan] = {}
    for p in plans:
        pol = p.policy
        if pol.packed or pol.kind == "longest":
            kept.append(p)
            continue
        key = (pol.grouped, tuple(pol.padded_length(m) for m in sorted(maxima)))
        if key in seen:
            notes.append(f"{p.name} pads every batch as {seen[key].name} does (the same "
                         "shapes): left out")
            continue
        seen[key] = p
        kept.append(p)
    return kept, notes


# ------------------------------------------------------------------------------ a run


def calibrate(run: Run, lengths: Lengths, base: CostModel, padded: dict[int, int],
              rows: dict[int, int]) -> CostModel:
    """Seconds per unit and per compiled graph from a run.

    ``unit_s``: the median, over the steps that compiled nothing (at least
    :data:`MIN_STEADY_CALIBRATION` of them whose length is known, step 0 left out; only those
    after a step that compiled nothing either, when there are any), of a step's training time
    (wall time less lazyscope's own and the program's start,
    :func:`~lazyscope.analyze.parts.training_s`) over its computed units (``rows`` rows of its
    ``padded`` length); the median, because a steady step now and then waits on something else
    (a collection, the last compile's first run);
    with fewer such steps, every step's wall time less its compile seconds over their units (a
    step of unknown length counts as the mean of the known).

    ``compile_s``: what the steps took beyond their units' execution, per compilation (a new
    graph costs its trace, lowering and hashing, and its first run, not only the compiler's
    seconds), never less than the compiler's own seconds. ``graphs_per_shape`` /
    ``extra_graphs``: the graphs a padded length compiles and those compiled once whatever the
    lengths (:func:`_graphs_per_shape`). ``base`` when the run measured nothing to calibrate
    on.

    Where every compilation has its op counts and seconds and some structure was compiled at
    two lengths, the graphs are priced by structure (:func:`_families`): the first shape is
    the once-only graphs and the first of each length-varying structure, at their own
    seconds (:func:`_graph_seconds`); each further shape one graph of each such structure, at
    what its later graphs took."""
    steps = run.steps
    n = len(steps)
    if n == 0 or not padded:
        return base
    walls, comp_s = training_s(run), steps.values("compile_s")
    comp_n = steps.values("compile_count")
    first = 1 if n > 1 else 0
    known = [rows.get(i, lengths.batch) * base.row(padded[i]) for i in padded if 0 <= i < n]
    mean_units = sum(known) / len(known)

    def units_of(i: int) -> float:
        return rows.get(i, lengths.batch) * base.row(padded[i]) if i in padded else mean_units

    steady = [i for i in range(first, n) if int(comp_n[i]) == 0 and i in padded]
    # a step after a compiling one waits on the new graph's first run (slower than the next,
    # often many times): the steps after a steady step are the steady rate, when there are any
    clean = [i for i in steady if i > 0 and int(comp_n[i - 1]) == 0]
    if clean and len(steady) >= MIN_STEADY_CALIBRATION:
        steady = clean
    if len(steady) >= MIN_STEADY_CALIBRATION or clean:
        rates = sorted(float(walls[i]) / units_of(i) for i in steady)
        unit_s = rates[(len(rates) - 1) // 2]
    else:
        timed = list(range(first, n))
        exec_s = float(sum(max(0.0, float(walls[i] - comp_s[i])) for i in timed))
        units = sum(units_of(i) for i in timed)
        unit_s = exec_s / units if units > 0 else 0.0
    if unit_s <= 0:
        return base
    compiles = int(comp_n.sum())
    compile_total = float(comp_s.sum())
    beyond = sum(max(0.0, float(walls[i]) - units_of(i) * unit_s) for i in range(n))
    compile_s = max(compile_total, beyond) / compiles if compiles else 0.0
    user = [e for e in run.events.iter("compile")
            if isinstance(e.data, Compile) and e.data.owner == OWNER_USER]
    graphs = len({e.key for e in user})
    shapes = len(set(padded.values()))
    per_shape, extra = _graphs_per_shape(user, padded, graphs, shapes)
    # the seconds steps that compiled nothing took beyond their rows (a graph's first run,
    # a wait) are the graphs' too, each its share
    cost = [(int(comp_n[i]), float(comp_s[i]), float(walls[i]) - units_of(i) * unit_s)
            for i in range(n) if comp_n[i] == comp_n[i] and int(comp_n[i]) > 0]
    share = (max(0.0, beyond - sum(b for _, _, b in cost)) / compiles) if compiles else 0.0
    families = _families(user, padded)
    if families is not None:
        once, firsts, by_structure = families
        priced = _graph_seconds(user, walls, comp_s, units_of, unit_s)
        first_shape = once + firsts
        first_n = float(len(first_shape))
        first_s = sum(priced[id(e)] for e in first_shape) + first_n * share
        # a further shape compiles one graph of each structure that varies with the length,
        # each at what that structure's later graphs took (its first, when it had no other)
        per_shape = float(len(firsts))
        shape_s = sum(sum(priced[id(e)] for e in graphs) / len(graphs)
                      for graphs in (by_structure.get(_signature(f)) or [f] for f in firsts))
        return CostModel(crossover=base.crossover, unit_s=unit_s,
                         compile_s=shape_s / per_shape + share, graphs_per_shape=per_shape,
                         extra_graphs=float(len(once)), calibrated=True,
                         first_graphs=first_n, first_s=first_s)
    # the first graphs apart from the later ones: the compiling steps in step order, each
    # group's seconds what its steps took beyond their rows (at least the compiler's own)
    k = max(1, round(per_shape + extra))
    split = 0
    first_n = 0.0
    while split < len(cost) and first_n < k:
        first_n += cost[split][0]
        split += 1

    def seconds(group: list[tuple[int, float, float]]) -> float:
        return max(sum(c for _, c, _ in group), sum(b for _, _, b in group), 0.0)

    first_s = seconds(cost[:split]) + first_n * share
    later = sum(c for c, _, _ in cost[split:])
    if later:  # later graphs there are: they are the price of each one more
        compile_s = seconds(cost[split:]) / later + share
    elif first_n:
        compile_s = first_s / first_n
    return CostModel(crossover=base.crossover, unit_s=unit_s, compile_s=compile_s,
                     graphs_per_shape=per_shape, extra_graphs=extra, calibrated=True,
                     first_graphs=first_n, first_s=first_s)


def _signature(e: Any) -> frozenset[tuple[str, int]] | None:
    """A graph's structure without its shapes: its HLO op counts (the same training step at
    another padded length has the same ops; a first step without optimizer state has other
    ones). None where the backend did not give them."""
    ops = getattr(e.data, "ops", None)
    return frozenset(ops.items()) if ops else None


def _families(user: list[Any], padded: dict[int, int]
              ) -> tuple[list[Any], list[Any], dict[Any, list[Any]]] | None:
    """The run's compilations cut by what a plan pays for them, from the graphs' structure
    (:func:`_signature`): ``once`` (a structure compiled at one padded length only: the
    program's first steps, a first step without optimizer state yet), ``firsts`` (the first
    compilation of each structure compiled at several lengths: what the plan's first shape
    costs, the compiler's warm-up included) and ``later`` (the others, by structure: what each
    further shape costs). None when the structures do not tell (no op counts, a compile of
    unknown seconds, or no structure compiled at two lengths)."""
    if not user or any(_signature(e) is None or not e.seconds or e.seconds != e.seconds
                       for e in user):
        return None
    lengths: dict[frozenset[tuple[str, int]], set[int]] = {}
    for e in user:
        sig = _signature(e)
        assert sig is not None
        lengths.setdefault(sig, set())
        if e.step in padded:
            lengths[sig].add(padded[e.step])
    shaped = {sig for sig, seen in lengths.items() if len(seen) >= 2}
    if not shaped:
        return None
    once: list[Any] = []
    firsts: list[Any] = []
    later: dict[Any, list[Any]] = {}
    for e in sorted(user, key=lambda ev: ev.step):
        sig = _signature(e)
        if sig not in shaped:
            once.append(e)
        elif any(_signature(f) == sig for f in firsts):
            later.setdefault(sig, []).append(e)
        else:
            firsts.append(e)
    return once, firsts, later


def _graph_seconds(user: list[Any], walls: Any, comp_s: Any, units_of: Any,
                   unit_s: float) -> dict[int, float]:
    """Each compilation's price: the seconds its step took beyond its rows (at least the
    compiler's own), shared among the step's compilations by their compile seconds (a tiny
    graph beside the training step's costs next to nothing)."""
    by_step: dict[int, list[Any]] = {}
    for e in user:
        by_step.setdefault(e.step, []).append(e)
    out: dict[int, float] = {}
    for step, events in by_step.items():
        own = sum(float(e.seconds) for e in events)
        if 0 <= step < len(walls):
            beyond = max(float(comp_s[step]), float(walls[step]) - units_of(step) * unit_s, own)
        else:
            beyond = own
        for e in events:
            out[id(e)] = beyond * float(e.seconds) / own if own > 0 else beyond / len(events)
    return out


def _graphs_per_shape(user: list[Any], padded: dict[int, int], graphs: int,
                      shapes: int) -> tuple[float, float]:
    """Graphs each padded shape compiles (the median over the shapes whose steps compiled),
    and the graphs compiled once beyond those (a first step without optimizer state yet
    compiles a graph the next step with the same shape does not reuse): a new shape costs the
    first, never the second."""
    if not shapes or not graphs:
        return 1.0, 0.0
    by_shape: dict[int, set[str]] = {}
    for e in user:
        if e.step in padded:
            by_shape.setdefault(padded[e.step], set()).add(e.key)
    counts = sorted(len(v) for v in by_shape.values())
    if not counts:
        return max(1.0, graphs / shapes), 0.0
    per_shape = float(max(1, counts[(len(counts) - 1) // 2]))
    return per_shape, max(0.0, graphs - per_shape * shapes)


def _padded_per_step(run: Run, lengths: Lengths) -> tuple[dict[int, int], dict[int, int]]:
    """step -> padded length it computed, and step -> rows, where the run tells."""
    n = len(run.steps)
    padded: dict[int, int] = {}
    rows: dict[int, int] = {}
    for i, a in run.steps.annotations.items():
        if not 0 <= i < n:
            continue
        if isinstance(a.get("seq_len"), int):
            padded[i] = a["seq_len"]
        if isinstance(a.get("rows"), int):
            rows[i] = a["rows"]
    if padded:
        return padded, rows
    try:
        g = graph_lengths(run, _step_rows(run))
    except NoLengths:
        return {}, {}
    return {s: v for s, v in g.by_step.items() if 0 <= s < n}, {}


def memory_model_for_run(run: Run, padded: dict[int, int] | None = None,
                         rows: dict[int, int] | None = None, batch: int = 1
                         ) -> tuple[MemoryModel | None, str]:
    """The run's graph bytes against the padded length (:func:`~lazyscope.analyze.memory.
    fit_memory`), from the graphs of its step site (the site of its largest graph whose length
    is known): each graph's length is the varying dimension of its inputs
    (:func:`graph_lengths`), else the padded length of the step that compiled it (``padded``,
    with its ``rows``). ``(None, why)`` when the run's graphs carry no memory analysis."""
    graphs = user_graph_bytes(run)
    if not graphs:
        return None, (f"{NOT_MEASURED}: the run's compiled graphs carry no memory analysis "
                      "(XLA's; torch.compile's graphs have none)")
    try:
        g = graph_lengths(run)
        length_of = {key: g.by_graph.get(key) for _, key, _, _ in graphs}
        rows_of = {key: g.batch for key in length_of}
    except NoLengths:
        padded, rows = padded or {}, rows or {}
        length_of = {key: padded.get(step) for step, key, _, _ in graphs}
        rows_of = {key: rows.get(step, batch) for step, key, _, _ in graphs}
    known = [(site, length_of[key], rows_of[key], total) for _, key, site, total in graphs
             if length_of.get(key)]
    if not known:
        return None, (f"{NOT_MEASURED}: no compiled graph's padded length is known (the varying "
                      "dimension of its inputs, or a seq_len step annotation)")
    site, _, n_rows, _ = max(known, key=lambda k: k[3])
    points: dict[int, int] = {}
    for s, length, r, total in known:
        if s == site and r == n_rows and length is not None:
            points[length] = max(points.get(length, 0), total)
    return fit_memory(points, n_rows, site), ""


def advice_for_run(run: Run, *, max_buckets: int = 8, horizon: int | None = None,
                   top: int | None = None, packing: bool = True,
                   device_memory: int | None = None) -> Advice:
    """The advice for a traced run (module docstring), calibrated on its own compile and
    execute seconds, each plan's largest graph predicted from the run's own graphs
    (:func:`memory_model_for_run`; ``device_memory``: rule out those that would not fit);
    raises :class:`NoLengths` when it holds no length stream, :class:`NothingFits` when no
    plan fits."""
    lengths = lengths_from_run(run, top=top)
    info = run.meta.run_info
    base = cost_model(info.workload)
    padded, rows = _padded_per_step(run, lengths)
    model = calibrate(run, lengths, base, padded, rows)
    if not model.calibrated:
        model = prior_model(base, lengths.batch, lengths.top)
    memory, memory_note = memory_model_for_run(run, padded, rows, lengths.batch)
    task, collator = data_task(info.loaders)
    # packing puts several documents in a row: it fits one label a token (a language model
    # with a document mask), never one label a sequence; and it replaces the collator, so
    # never one that does more than pad (its masking would be lost)
    job = more_than_padding(collator)
    advice = advise(lengths, max_buckets=max_buckets, horizon=horizon, model=model,
                    packing=packing and task != SEQUENCE_LABELS and not job, memory=memory,
                    device_memory=device_memory)
    notes = advice.notes + ((f"packed rows are left out: the data has {task} (packing "
                             "several documents in a row needs a label for every token)",)
                            if task == SEQUENCE_LABELS and packing else ())
    if job and packing and task != SEQUENCE_LABELS and collator is not None:
        notes += (f"packed rows are left out: they would replace {collator['name']} and lose "
                  f"{job}; the plans change its padding only",)
    plans = advice.plans
    own = next((p for p in plans if p.policy.kind == "longest"), None)
    if own is not None and lengths.source == "graph inputs":
        measured = _as_measured(run, own, advice, model)
        if measured is not None:
            plans = tuple(_rank(measured if p is own else p for p in plans))
            notes += (f"pad to longest is what this run does: priced on its own {len(run.steps)} "
                      "steps" + (f" and {advice.horizon - len(run.steps):,} more like them"
                                 if advice.horizon > len(run.steps) else ""),)
    return replace(advice, plans=plans, run_policy=info.workload.policy, task=task,
                   collator=collator, notes=notes, memory_note=memory_note)


def _as_measured(run: Run, plan: Plan, advice: Advice, model: CostModel) -> Plan | None:
    """The run's own policy (pad to longest) priced on the run itself: its first ``horizon``
    steps' training and compile seconds as measured
    (:func:`~lazyscope.analyze.parts.training_s`); past its end, each step more at the model's
    price (as every plan's steps are) and a compile for each shape expected new there (the
    shapes it has not met yet, with the probabilities of the estimated batch maxima). None when
    the run's steps were not timed."""
    steps = run.steps
    n = len(steps)
    walls, comp_s = training_s(run), steps.values("compile_s")
    comp_n = steps.values("compile_count")
    if n == 0 or not float(walls.sum()) > 0:
        return None
    h = advice.horizon
    k = min(h, n)
    compile_ = float(sum(float(c) for c in comp_s[:k] if c == c))
    graphs = float(sum(int(c) for c in comp_n[:k] if c == c))
    execute = max(0.0, float(walls[:k].sum()) - compile_)
    if h > n:
        lengths = advice.lengths
        # the steps past the run's end are priced as every other plan's are (the calibrated
        # rows): a few steady steps' wall times would price this plan alone on another basis
        per_step = plan.execute_s / plan.steps if plan.steps else 0.0
        seqs = list(lengths.sequences)
        shapes = _longest_shapes(seqs[:SIMULATION_LIMIT], seqs, lengths.batch, lengths.grouped)
        seen = set(lengths.maxima)
        new = _expected_distinct((p for m, p in shapes.items() if m not in seen), h - n)
        graphs += new * model.graphs_per_shape
        compile_ += new * model.graphs_per_shape * model.compile_s
        execute += (h - n) * per_step
    total = compile_ + execute
    real = plan.tokens_per_s * plan.total_s  # the same data as every plan
    return replace(plan, graphs=graphs, compile_s=compile_, execute_s=execute, total_s=total,
                   tokens_per_s=real / total if total > 0 else 0.0)


def advice_if_recompiling(run: Run, sites: list[SiteCompiles] | None = None) -> Advice | None:
    """:func:`advice_for_run` for a run that keeps recompiling (a recompile finding: a site with
    two or more recompilations, see ``recompiles.py``) while its padded sequence length (the
    ``seq_len`` step annotation) took several values; ``None`` otherwise. This is the advice the
    text, JSON and HTML reports show. ``sites`` is the recompile analysis when already made."""
    shapes = {a["seq_len"] for i, a in run.steps.annotations.items()
              if 0 <= i < len(run.steps) and "seq_len" in a and "batch_max_len" in a}
    if len(shapes) < 2:
        return None
    if sites is None:
        sites = explain_recompiles(run)
    if not any(s.verdict == CHURN for s in sites):
        return None
    try:
        advice = advice_for_run(run)
    except (NoLengths, ValueError):
        return None
    return replace(advice, seq_len_values=len(shapes))


# ------------------------------------------------------------------------------ measured


def _plan_for_policy(advice: Advice, policy: Policy) -> Plan | None:
    """The plan of ``advice`` that runs ``policy`` (same kind and shape), if it priced one."""
    for p in (*advice.plans, *advice.per_k, *advice.same_shapes):
        q = p.policy
        if q.kind == "longest" and policy.kind == "longest":
            return p
        if q.packed and policy.packed and (q.rows, q.row_len) == (policy.rows, policy.row_len):
            return p
        if not q.packed and q.kind != "longest" and policy.kind in ("max", "buckets") and \
                tuple(q.boundaries) == tuple(policy.boundaries) and q.grouped == policy.grouped:
            return p
    return None


@dataclass(frozen=True)
class MeasuredRow:
    """What a compare row measured, with the policy it ran (auto resolved)."""

    label: str
    policy: Policy
    steps: int
    compiles: int
    padding_efficiency: float | None
    tokens_per_s: float
    #: its largest compiled graph's bytes, where measured
    graph_memory: int | None = None


def plan_for_run(advice: Advice, policy: Policy, steps: int) -> Plan:
    """What ``advice``'s cost model predicts for a run of ``steps`` steps under ``policy`` (a
    compare's run: that many steps, so a packed run's steps hold more data than as many padded
    steps)."""
    lengths = advice.lengths
    ctx = _Ctx(advice.cost_model, lengths.batch, steps, lengths.mean, lengths.top)
    if policy.packed and policy.rows and policy.row_len:
        return _packed_plan(list(lengths.sequences), policy.rows, policy.row_len, ctx,
                            steps=steps)
    short = advise(lengths, max_buckets=max(1, len(advice.per_k)), horizon=steps,
                   model=advice.cost_model, packing=False)
    plan = _plan_for_policy(short, policy)
    if plan is None:
        maxima_list = list(lengths.maxima) or _random_maxima(lengths.sequences, lengths.batch)
        plan = _padded_plan(policy.label(), policy, _normalised(histogram(maxima_list)), ctx,
                            ("collate",))
    return plan


def predict_compare(advice: Advice, policies: Sequence[str], steps: int) -> dict[str, Plan]:
    """Each ``lazyscope compare`` policy (its ``--policies`` name) priced for a run of
    ``steps`` steps by ``advice`` (calibrated on a run of the same workload): ``auto`` and
    ``bucket:auto`` what the advisor picks for that many steps, as the scenarios do; a fixed
    policy at the run's max length and batch. A name that is no policy is left out."""
    lengths = advice.lengths
    picked = advise(lengths, max_buckets=max(1, len(advice.per_k)), horizon=steps,
                    model=advice.cost_model, packing=advice.packing)
    out: dict[str, Plan] = {}
    for name in policies:
        try:
            if name in ("auto", "bucket:auto"):
                chosen = picked.recommended if name == "auto" else picked.best_buckets
                policy = chosen.policy
            else:
                policy = fixed_policy(name, lengths.top, lengths.batch)
        except ValueError:
            continue
        if lengths.grouped and not policy.packed:
            policy = replace(policy, grouped=True)
        out[name] = plan_for_run(advice, policy, steps)
    return out


def match_measured(advice: Advice, rows: Sequence[MeasuredRow], *, compared: str) -> Advice:
    """``advice`` with each measured row beside the plan that runs its policy, predicted for the
    row's own run: as many steps (a compare runs few: compilation weighs more), so a packed row
    predicts the data that many packed steps hold, not the padded steps' data."""
    out = []
    lengths = advice.lengths
    for row in rows:
        if row.steps < 1:
            continue
        plan = plan_for_run(advice, row.policy, row.steps)
        longest = max(lengths.sequences, default=lengths.top)
        predicted = with_memory(plan, advice.memory, lengths.batch,
                                longest if plan.policy.kind == "longest" else lengths.top, None)
        out.append(Measured(row.label, plan.name, row.steps, row.compiles,
                            row.padding_efficiency, row.tokens_per_s, plan.tokens_per_s,
                            plan.graphs, plan.padding_efficiency, row.graph_memory,
                            predicted.graph_bytes))
    return replace(advice, measured=tuple(out), compared=compared)
