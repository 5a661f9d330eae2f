"""``generate()`` under a lazy backend: the graphs a Hugging Face model's generation loop
compiles, at the user's line that called it.

transformers' ``generate`` runs its decoding loop in Python: with the default cache (a
``DynamicCache`` that grows by one position per token) and a stopping criterion read on the
host at every token, each generated token cuts a new graph (the token's step, and the read that
decides whether to stop), and a prompt of another length makes every graph of the next call
new as well. Measured on XLA:CPU (transformers 5.24, ``tests/programs/hf_generate_eval.py``):
three calls of 8 tokens compiled 68 graphs, each run once; with
``cache_implementation="static"``, prompts padded to one length and a fixed
``max_new_tokens``, the first call compiled 24 graphs and the next calls none.

A compile event belongs to a generation when its stack passes through transformers'
``generation/utils.py`` (:data:`GENERATE_FILE`); its site is the innermost user frame (the
``model.generate(...)`` line, or the ``trainer.evaluate()`` that called it). Its calls are told
apart by the step, and within a step by the prompt's graphs (a graph cut inside
:data:`PREFILL` after graphs of the decoding loop, :data:`DECODING`, starts a call). A site whose calls keep compiling graphs
(:data:`MIN_NEW_GRAPHS` first met after its first call) is a ``recompile`` finding there, with the fixes transformers documents for XLA: a
static cache, one prompt length, a fixed ``max_new_tokens``. The recompile findings and notes
of the same site (families cut out of the same graphs) are that finding's: one site, one
story. Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lazyscope.analyze.findings import Finding, RecompileFacts
from lazyscope.analyze.recompiles import CHURN
from lazyscope.analyze.wording import say
from lazyscope.core import units
from lazyscope.model import Frame, Run, user_site

#: the library file whose frames mark a compile as a generation's
GENERATE_FILE = "transformers/generation/utils.py"
#: graphs first compiled after a site's first call that compiled, at least, for a finding
MIN_NEW_GRAPHS = 4
#: the function of transformers' generation that runs a call's prompt (transformers 5)
PREFILL = "_prefill"
#: the functions of transformers' generation that run the decoding loop
DECODING = frozenset({"_sample", "_beam_search", "_assisted_decoding", "_dola_decoding",
                      "_contrastive_search", "_group_beam_search",
                      "_constrained_beam_search"})


@dataclass
class GenerationSite:
    """The graphs compiled inside ``generate`` called at one user line."""

    site: Frame
    stack: list[Frame]
    graphs: int
    compiles: int
    seconds: float
    steps: list[int]
    #: graphs first compiled in a later step than the site's first generating one
    new_later: int
    #: graphs run only once (None: the backend records no executions)
    once: int | None = None
    share: float = 0.0
    #: the calls that compiled graphs (a new step, or a prefill after decoding, starts one)
    calls: int = 1
    keys: set[str] = field(default_factory=set)


def _generating(stack: tuple[Frame, ...] | list[Frame]) -> bool:
    return any(f.library and f.file.replace("\\", "/").endswith(GENERATE_FILE)
               for f in stack)


def generation_sites(run: Run, wall_seconds: float = 0.0) -> list[GenerationSite]:
    """Each user line whose ``generate`` calls compiled graphs, the costliest first."""
    ev = run.events
    by_site: dict[tuple[str, int], GenerationSite] = {}
    first_call: dict[str, int] = {}
    calls: dict[tuple[str, int], tuple[int, bool, int]] = {}  # site -> (step, decoded, call)
    for e in ev.iter("compile"):
        if not _generating(e.stack):
            continue
        site = user_site(e.stack)
        if site is None:
            continue
        place = (site.file, site.line)
        g = by_site.get(place)
        if g is None:
            g = by_site[place] = GenerationSite(
                site, [f for f in e.stack if not f.library], 0, 0, 0.0, [], 0)
        # a call starts at a new step, or where a prefill graph follows the decoding's
        names = {f.function for f in e.stack if f.library}
        prefill = PREFILL in names
        decoding = not prefill and bool(names & DECODING)
        step, decoded, call = calls.get(place, (e.step, False, 0))
        if e.step != step or (prefill and decoded):
            call, decoded = call + 1, False
        calls[place] = (e.step, decoded or decoding, call)
        g.compiles += 1
        g.seconds += e.seconds
        if e.step not in g.steps:
            g.steps.append(e.step)
        if e.key and e.key not in g.keys:
            g.keys.add(e.key)
            first_call[e.key] = call
    runs = _executions(run)
    out = []
    for g in by_site.values():
        g.graphs = len(g.keys) or g.compiles
        g.calls = calls[(g.site.file, g.site.line)][2] + 1
        g.new_later = sum(1 for k in g.keys if first_call[k] > 0)
        if runs is not None:
            g.once = sum(1 for k in g.keys if runs.get(k, 0) <= 1)
        g.share = g.seconds / wall_seconds if wall_seconds else 0.0
        out.append(g)
    return sorted(out, key=lambda g: -g.seconds)


def _executions(run: Run) -> dict[str, int] | None:
    ev = run.events
    if ev.count("execute") == 0:
        return None
    sel = ev.indices("execute")
    counts: dict[str, int] = {}
    for kid in np.asarray(ev.key[sel]).tolist():
        key = ev.key_of(kid)
        counts[key] = counts.get(key, 0) + 1
    return counts


def keeps_compiling(g: GenerationSite) -> bool:
    """The site's calls keep compiling new graphs (see the module docstring)."""
    return g.calls >= 2 and g.new_later >= MIN_NEW_GRAPHS


def generation_finding(backend: str, g: GenerationSite) -> Finding:
    calls = g.calls
    once = (f", {g.once} of them run only once" if g.once is not None else "")
    detail = say(backend, "generate_detail", where=f"{g.site.file}:{g.site.line}",
                 graphs=g.graphs, calls=calls, per=units.count(round(g.graphs / calls)),
                 once=once, new=g.new_later, seconds=units.seconds(g.seconds),
                 share=f"{g.share:.0%}" if g.share else "?")
    facts = RecompileFacts(compiled_at=g.site, changes=[], varying=[], graphs=g.graphs,
                           dynamic=[], classes={}, verdict=CHURN,
                           reasons=["generate() compiles new graphs at every call (a cache "
                                    "that grows, a prompt of another length)"])
    steps = sorted(g.steps)
    return Finding("recompile", g.site.file, g.site.line, g.site.function, list(g.stack),
                   g.new_later, steps, len(steps), g.seconds, detail,
                   say(backend, "generate_fix"), facts)


def with_generation(backend: str, run: Run, findings: list[Finding], notes: list[Finding],
                    wall_seconds: float = 0.0) -> tuple[list[Finding], list[Finding]]:
    """``findings`` and ``notes`` with a finding for each ``generate`` site that keeps
    compiling, in place of the recompile findings and notes of the same site; a site whose
    later calls reuse the first call's graphs (a static cache, one prompt length) keeps none:
    its first call's graphs, however many, are its warm-up."""
    every = generation_sites(run, wall_seconds)
    if not every:
        return findings, notes
    sites = [g for g in every if keeps_compiling(g)]
    places = {(g.site.file, g.site.line) for g in every}

    def covered(f: Finding) -> bool:
        at = f.compiled_at
        return f.kind in ("recompile", "reuse") and (
            (f.file, f.line) in places or (at is not None and (at.file, at.line) in places))

    made = [generation_finding(backend, g) for g in sites]
    return ([*made, *(f for f in findings if not covered(f))],
            [n for n in notes if not covered(n)])
