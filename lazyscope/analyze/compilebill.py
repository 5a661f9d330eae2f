"""The compile bill: what compiling cost the run, by line, and whether a persistent cache was
there to pay it once.

* ``seconds`` and ``share``: every compilation's seconds (the backend's own measure) against
  the run's wall time;
* the first step that compiled (step 0 most often; the step after the program's set-up under
  ``torch_xla.compile``, which ends a step before it runs the function): its wall time and its
  compilations ("the first step took 4 min: 27 graphs", "step 1, the first to compile, took
  7.1 s: 1 graph");
* ``lines``: the user lines the graphs were compiled at, the costliest first, each with its
  graphs, seconds and share of the compile time, and the largest graph's op count and inputs;
  ``top_share``: what the first :data:`TOP_LINES` of them cost together;
* ``cache``: the persistent compilation cache (``meta.json`` ``compile_cache``:
  :mod:`lazyscope.backends.compile_cache`): configured or not, its hits and misses by the
  backend's own counters, and for the misses what the run can tell (the directory was empty or
  new; it held entries that did not match, whose key holds the graph, the XLA flags and the
  torch_xla version; cached graphs that failed to load).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.wording import say
from lazyscope.core import units
from lazyscope.model import Run, user_site

#: the lines the bill names together ("these 3 lines cost 80%")
TOP_LINES = 3
#: lines listed
MAX_LINES = 10
#: a run that spends less than this share of its time compiling says nothing of a cache that
#: is not configured
CACHE_ADVICE_SHARE = 0.1


@dataclass
class BillLine:
    """The graphs compiled at one user line."""

    site: str
    graphs: int
    seconds: float
    #: of the run's compile seconds
    share: float
    #: the largest graph's op count and inputs (where the backend recorded them)
    ops: int | None = field(default=None, metadata={"omit_none": True})
    inputs: str | None = field(default=None, metadata={"omit_none": True})


@dataclass
class CacheUse:
    """The persistent compilation cache of the run and what it did."""

    kind: str
    configured: bool
    path: str | None
    hits: int | None
    misses: int | None
    #: entries in its directory when the program first needed it (None: no directory)
    entries_before: int | None
    failed_loads: int | None
    #: what lazyscope can say about it, in a sentence
    verdict: str


@dataclass
class CompileBill:
    seconds: float
    #: of the run's wall time
    share: float
    graphs: int
    first_step_s: float | None
    first_step_graphs: int
    #: the first step that compiled (the one ``first_step_s`` and ``first_step_graphs`` are of)
    first_step: int
    lines: list[BillLine]
    #: the compile share of the first TOP_LINES lines
    top_share: float
    cache: CacheUse | None = field(default=None, metadata={"omit_none": True})


def graph_inputs(data: Any, limit: int = 4) -> str | None:
    inputs = getattr(data, "inputs", None)
    if not inputs:
        return None
    shown = [f"{i.dtype}[{','.join(map(str, i.shape))}]" for i in inputs[:limit]]
    more = len(inputs) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def op_count(data: Any) -> int | None:
    ops = getattr(data, "ops", None)
    return int(sum(ops.values())) if isinstance(ops, dict) and ops else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def cache_use(backend: str, info: Any, compile_share: float) -> CacheUse | None:
    """The run's persistent cache and what it did (None: the backend did not record it)."""
    if not isinstance(info, dict):
        return None
    kind = str(info.get("kind", ""))
    configured = bool(info.get("configured"))
    hits, misses = _int(info.get("hits")), _int(info.get("misses"))
    before = _int(info.get("entries_before"))
    failed = _int(info.get("failed_loads"))
    path = info.get("path") if isinstance(info.get("path"), str) else None
    if not configured:
        key = "cache_none" if compile_share >= CACHE_ADVICE_SHARE else "cache_none_cheap"
    elif failed:
        key = "cache_failed_loads"
    elif misses and not before:
        key = "cache_cold"
    elif misses:
        key = "cache_stale"
    elif hits:
        key = "cache_hits"
    else:
        key = "cache_unused"
    verdict = say(backend, key,
                  path=path or "?", hits=units.counted(hits or 0, "hit"),
                  misses=units.counted(misses or 0, "miss", "misses"),
                  entries=units.counted(before or 0, "entry", "entries"),
                  failed=units.counted(failed or 0, "cached graph"))
    return CacheUse(kind, configured, path, hits, misses, before, failed, verdict)


def compile_bill(run: Run) -> CompileBill | None:
    """The run's compile bill, or None when it compiled nothing."""
    ev = run.events
    idx = ev.indices("compile")
    if not len(idx):
        return None
    seconds = float(ev.seconds[idx].sum())
    walls = run.steps.values("wall_s")
    tail = run.steps.tail
    wall = float(walls.sum()) + float(tail.wall_s or 0.0 if tail is not None else 0.0)
    by_site: dict[str, list[int]] = {}
    for i in idx:
        e = ev.event(int(i))
        at = user_site(e.stack)
        by_site.setdefault(f"{at.file}:{at.line}" if at else "unknown line",
                           []).append(int(i))
    lines = []
    for where, members in by_site.items():
        secs = float(ev.seconds[members].sum())
        largest = max(members, key=lambda i: op_count(ev.event(i).data) or 0)
        data = ev.event(largest).data
        lines.append(BillLine(where, len(members), secs, secs / seconds if seconds else 0.0,
                              op_count(data), graph_inputs(data)))
    lines.sort(key=lambda b: -b.seconds)
    first = int(ev.step[idx].min())
    info = run.meta.run_info
    share = seconds / wall if wall else 0.0
    return CompileBill(
        seconds=seconds, share=share, graphs=len(idx),
        first_step_s=float(walls[first]) if 0 <= first < len(walls) else None,
        first_step_graphs=int(np.count_nonzero(ev.step[idx] == first)), first_step=first,
        lines=lines[:MAX_LINES],
        top_share=float(sum(b.share for b in lines[:TOP_LINES])),
        cache=cache_use(run.meta.backend, info.compile_cache, share))


def bill_lines(bill: CompileBill) -> list[str]:
    """The bill in a few lines (the text report's)."""
    out = []
    first = ""
    if bill.first_step_s is not None:
        which = ("the first step took" if bill.first_step == 0
                 else f"step {bill.first_step}, the first to compile, took")
        first = (f"{which} {units.seconds(bill.first_step_s)}: "
                 f"{units.counted(bill.first_step_graphs, 'graph')}; ")
    top = bill.lines[:TOP_LINES]
    names = ", ".join(f"{b.site} ({b.share:.0%}, {units.counted(b.graphs, 'graph')})"
                      for b in top)
    out.append(f"{first}{units.seconds(bill.seconds)} compiling in all ({bill.share:.0%} of "
               f"the run), {units.counted(bill.graphs, 'graph')}; "
               + (f"{'these ' + str(len(top)) + ' lines' if len(top) > 1 else 'one line'} "
                  f"cost {bill.top_share:.0%}: {names}" if top else ""))
    if bill.cache is not None:
        out.append(bill.cache.verdict)
    return out
