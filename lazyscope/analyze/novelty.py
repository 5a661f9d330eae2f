"""Will this family of graphs keep compiling? Novelty after warm-up, priced over the user's run.

A compile site is warm when its graphs stop being new. The evidence is the run itself: how many
distinct graphs the family made, how often each ran (``runs``), and when each was first made.
From it, an estimate of the graphs still to come and what they would cost:

* **How many are left to meet** (``unseen``): Chao1's bias-corrected estimate of the graphs the
  family can make but has not yet, ``f1 (f1 - 1) / (2 (f2 + 1))`` with ``f1`` the graphs that ran
  once and ``f2`` those that ran twice (Chao 1984; Chao 2005): graphs that keep turning up once
  mean many more exist; a set whose every graph ran several times is complete. Chao1 is a lower
  bound, blind to a long tail; where one dimension makes the graphs and its sizes fill a range
  (a length padded to the batch's longest: at least :data:`DENSE` of the sizes between the
  smallest and the largest, on their common grid), the sizes of that range not met yet count
  too (:func:`range_gaps`). A run in which no graph ever ran twice says nothing of where they
  end: every call ahead may make one. Bounded by what can exist (``bound``: the buckets a
  program declares).
  Sizes the program's data loader already made that no graph has yet are graphs known to be
  coming (the loader works ahead of the steps).
* **How fast they come** (``rate``): the chance that the next call makes a new graph, the smaller
  of Good-Turing's ``f1 / n`` (the share of calls whose graph ran only then) and the share of
  new graphs among the calls of the run's second half. The second keeps work that compiles its
  graphs in a burst and then reuses them (a closure optimizer tracing the model many times in
  its first step; a length curriculum's phases) from reading as ongoing novelty; the first keeps
  one late rare bucket from reading as a trend.
* **Over the horizon**: the expected new graphs in the next ``H`` calls, after Shen, Chao & Lin
  (2003): ``unseen * (1 - (1 - rate / unseen) ** H)`` (each unseen graph is met at the rate the
  unseen ones share); priced at the family's median compile seconds, against the horizon's step
  time. The family keeps compiling (a finding) when at least one more graph is expected and its
  compilations would take at least :data:`COST_SHARE` of the horizon's time.

The horizon is the user's run when lazyscope knows it (``meta.json`` info ``planned_steps``, a
Trainer's ``max_steps``), else :data:`DEFAULT_HORIZON` more steps. A short healthy run whose
first compilations outweigh its steps is not a problem (nothing new is expected); new graphs that
keep coming are, however often some of the graphs were reused.

``tests/unit/test_novelty.py`` proves the rule over simulated runs (dynamic padding from uniform
and lognormal lengths of many ranges and batch sizes, true buckets, a partial last batch, a
length curriculum, bursts) against the truth computed from each run's own distribution, and
says on what share of seeds the verdict is right. Pure functions: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: a family keeps compiling (a finding) when at least MIN_NEW more graphs are expected over the
#: horizon (fewer is a warm-up not finished: a rare bucket, a last partial batch) and their
#: compilations would take at least COST_SHARE of the horizon's step time
MIN_NEW = 3.0
COST_SHARE = 0.05
#: ... or, measured, when the run's second half met at least MIN_NEW new graphs and compiling
#: them took at least this share of that half's wall time (however the estimate prices them)
DOMINANT = 0.5
#: the steps lazyscope prices novelty over when it does not know the user's run
DEFAULT_HORIZON = 1000
#: sizes seen filling this share of the grid between the smallest and the largest make a range
#: (every size between can come), not a set of buckets
DENSE = 0.5


@dataclass(frozen=True)
class Outlook:
    """What a family of graphs is expected to cost from here on."""

    graphs: int  # distinct graphs so far
    once: int  # graphs that ran once (f1)
    twice: int  # graphs that ran twice (f2)
    calls: int  # the family's executions so far (n)
    unseen: float  # graphs estimated left to meet (Chao1, bounded)
    rate: float  # chance that a call makes a new graph
    horizon_steps: int
    horizon_calls: float
    expected_new: float  # new graphs expected over the horizon
    seconds_each: float  # median compile seconds of the family's graphs
    step_seconds: float  # the run's steady step time
    bound: int | None = None  # graphs that can exist at most, when known
    new_late: int = 0  # graphs first met in the run's second half (by steps, or by its own calls)
    planned: int | None = None  # the steps of the user's run, when known
    #: measured: the share of the run's second half spent compiling the family's new graphs
    late_share: float = 0.0

    @property
    def cost_seconds(self) -> float:
        return self.expected_new * self.seconds_each

    @property
    def horizon_seconds(self) -> float:
        return self.horizon_steps * self.step_seconds

    @property
    def share(self) -> float:
        """The expected compile time's share of the horizon's step time."""
        if self.horizon_seconds <= 0:
            return math.inf if self.cost_seconds > 0 else 0.0
        return self.cost_seconds / self.horizon_seconds

    @property
    def keeps_compiling(self) -> bool:
        expected = self.expected_new >= MIN_NEW and self.share >= COST_SHARE
        measured = self.new_late >= MIN_NEW and self.late_share >= DOMINANT
        return expected or measured


def unseen_graphs(once: int, twice: int, seen: int, bound: int | None) -> float:
    """Chao1's bias-corrected estimate of the graphs not met yet, capped by ``bound``."""
    est = once * (once - 1) / (2.0 * (twice + 1))
    if bound is not None:
        est = min(est, max(0.0, float(bound - seen)))
    return est


def range_gaps(sizes: list[int], largest: int | None = None) -> int:
    """Sizes a varying dimension has not taken yet from its smallest up to its largest (up to
    ``largest`` when the program's largest length is known), on the grid its sizes share (their
    greatest common step: ``pad_to_multiple_of``, bucket widths), when the sizes seen fill at
    least :data:`DENSE` of the grid up to the largest seen (a length padded to the batch's
    longest); 0 for sparse sizes (buckets spread over a range) or fewer than 3."""
    if len(sizes) < 3:
        return 0
    lo, hi = min(sizes), max(sizes)
    step = 0
    for s in sizes:
        step = math.gcd(step, s - lo)
    if step == 0:
        return 0
    seen = len(set(sizes))
    if seen < DENSE * ((hi - lo) // step + 1):
        return 0
    top = max(hi, largest) if largest is not None else hi
    return (top - lo) // step + 1 - seen


def outlook(runs: list[int], first_calls: list[int], *, steps: int, seconds_each: float,
            step_seconds: float, horizon_steps: int = DEFAULT_HORIZON,
            bound: int | None = None, sizes: list[int] | None = None,
            largest: int | None = None, planned: int | None = None,
            late_share: float = 0.0, late: tuple[int, int] | None = None,
            ahead: int = 0) -> Outlook:
    """The outlook of a family from its graphs' executions (``runs``, one entry a graph) and the
    call (0-based, in the family's order of calls) at which each graph was first made
    (``first_calls``), over a run of ``steps`` steps. ``sizes``: the size of the one varying
    dimension in each graph, when one dimension makes the graphs; ``largest``: the largest size
    it can take, when known. ``late``: (graphs first made, calls made) in the second half of the
    run's steps, when the caller counts them by step: a family that made its graphs in a burst
    early and is done (or calls on without new ones) has no recent novelty however few of its
    own calls came after; by default, the second half of the family's own calls. ``ahead``:
    graphs known to be coming (sizes the data loader already made that no graph has yet)."""
    n = sum(runs)
    once = sum(1 for r in runs if r == 1)
    twice = sum(1 for r in runs if r == 2)
    unseen = max(unseen_graphs(once, twice, len(runs), bound), float(ahead))
    if sizes:
        gaps = float(range_gaps(sizes, largest))
        unseen = max(unseen, gaps if bound is None else min(gaps, max(0, bound - len(runs))))
    calls_per_step = n / steps if steps > 0 else 1.0
    horizon_calls = horizon_steps * calls_per_step
    if n >= MIN_NEW and once == len(runs) == n:
        # no graph ever ran twice: nothing in the run says the graphs run out (Chao1 knows
        # nothing without a repeat); every call ahead may make one, up to what can exist
        unseen = max(unseen, horizon_calls if bound is None else
                     min(horizon_calls, max(0.0, float(bound - len(runs)))))
    good_turing = once / n if n else 0.0
    if late is not None:
        late_new, late_calls = late
    else:
        half = n // 2
        late_calls = n - half
        late_new = sum(1 for c in first_calls if c >= half)
    recent = late_new / late_calls if late_calls > 0 else 0.0
    rate = min(good_turing, recent)
    if unseen <= 0 or rate <= 0:
        expected = 0.0
    else:
        per_graph = min(1.0, rate / unseen)
        expected = unseen * -math.expm1(horizon_calls * math.log1p(-per_graph)) \
            if per_graph < 1.0 else unseen
    return Outlook(graphs=len(runs), once=once, twice=twice, calls=n, unseen=unseen, rate=rate,
                   horizon_steps=horizon_steps, horizon_calls=horizon_calls,
                   expected_new=expected, seconds_each=seconds_each,
                   step_seconds=step_seconds, bound=bound, new_late=late_new, planned=planned,
                   late_share=late_share)
