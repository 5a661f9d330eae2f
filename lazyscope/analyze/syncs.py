"""Where did Python wait for the device? ``sync`` events grouped by cause: the user's line, the
library line where the read happens when it is inside third-party code (transformers' mask code,
Trainer's logging, torch_xla's own API), whether the read ran inside a step closure, and whose
code made it: how many reads, in which steps, how long the host stalled, how many executions
they forced. Two causes behind one user line (``trainer.train()`` runs every read of a Hugging
Face program) are two groups.

* A line that reads in the step in two or more steps is a per-step pattern: a finding.
* A read inside a blocking step closure runs after the barrier: it stalls the host until the
  step's execution is done (no overlap with tracing the next step), but forces no execution of
  its own. In at least half the steps it is a note; otherwise it is only listed.
* A read in an async closure costs the training loop nothing: listed only.
* Reads a library API makes for itself (``xm.mesh_reduce``, ``xm.rendezvous``) are the user's cost
  when the user calls that API in the loop (a finding at the user's call, see
  :mod:`~lazyscope.analyze.findings`); once or now and then (a rendezvous per epoch) they are
  listed, not findings.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.events import distinct, group_events, id_counts
from lazyscope.model import OWNER_LIBRARY, Frame, Run, Stack, Sync, user_frames, user_site


@dataclass
class SyncSite:
    """The reads at one user line."""

    site: Frame | None
    stack: Stack
    closure: str
    owner: str
    count: int = 0
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seconds: float = 0.0
    executions: int = 0
    reads: dict[str, int] = field(default_factory=dict)
    library_call: str = ""  # the library function the read happened in, when not the user's
    #: the innermost library frame the read happened in (None: in the user's own code)
    happens_at: Frame | None = None
    #: reads whose value still had to be computed (they cut the step's graph), and reads the
    #: backend said either way about
    pending: int = 0
    pending_known: int = 0
    #: each read's step and seconds (for its price)
    event_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    event_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: what the reads cost the steady steps (:func:`read_price`): the host's waits there, and
    #: the overlap lost (the host's own work of a step that read, which could have run while
    #: the device computed, up to the wait); None where the step's time is not cut into parts
    price: float | None = None
    price_wait: float = 0.0
    price_lost: float = 0.0
    #: the steps it was priced over: ``steady``, or ``all`` (too few steady steps)
    price_basis: str = "steady"

    @property
    def recurring(self) -> bool:
        return len(self.steps) >= 2

    @property
    def every(self) -> int | None:
        """N when the reads come every N steps (N >= 2: most gaps between the steps that read
        are N), else None (every step, or no pattern)."""
        return period(self.steps)


def period(steps: np.ndarray) -> int | None:
    """The gap most of the steps' gaps have, when it is 2 or more and at least 80% of them have
    it (reads every N steps); None otherwise."""
    gaps = np.diff(distinct(np.asarray(steps, dtype=np.int64)))
    if len(gaps) < 1:
        return None
    counts = np.bincount(gaps)  # gaps between distinct sorted steps: 1 or more
    best = int(np.argmax(counts))
    return best if best >= 2 and counts[best] >= 0.8 * len(gaps) else None


def sync_sites(run: Run) -> list[SyncSite]:
    """One entry per (user line, closure kind, owner), the longest stall first."""
    ev = run.events

    def key(stack: Stack, data: Sync | None) -> tuple[Any, ...]:
        site = user_site(stack)
        closure = data.closure if data is not None else ""
        owner = data.owner if data is not None else "user"
        lib = ""
        if owner == OWNER_LIBRARY:
            # the API that made the read (xm.rendezvous), else the library function it
            # happened in (runs recorded before the backend named the API)
            if data is not None and data.api:
                lib = data.api
            elif stack and stack[0].library:
                lib = stack[0].function
        # where inside a library the read happens (user code's reads through a library call:
        # Trainer's logging, transformers' mask code); an API that reads for itself
        # (xm.rendezvous) is named by the API, whatever helper of its own made the read
        inner = (stack[0] if not lib and stack and stack[0].library and site is not None
                 else None)
        if lib and data is not None and data.called_by is not None:
            # the API was called by library code (a Trainer's logging), not by the user: the
            # read happens where that library calls it
            inner = data.called_by
        return ((site.file, site.line, site.function) if site else ("", 0, ""), closure, owner,
                lib, (inner.file, inner.line, inner.function) if inner else None)

    out = []
    for (where, closure, owner, lib, inner), sel in group_events(ev, "sync", key):
        stack = ev.stack_of(int(ev.stack[sel[0]]))
        reads: Counter[str] = Counter()
        payloads, counts = id_counts(ev.payload[sel])
        pending = known = 0
        for pid, n in zip(payloads, counts, strict=True):
            data = ev.payload_of(int(pid))
            reads[(data.read or data.message or "read") if data is not None else "read"] += int(n)
            if data is not None and data.pending is not None:
                known += int(n)
                pending += int(n) if data.pending else 0
        out.append(SyncSite(
            site=Frame(where[0], where[1], where[2]) if where[0] else None,
            stack=tuple(user_frames(stack)), closure=closure, owner=owner,
            count=len(sel), steps=distinct(ev.step[sel]), seconds=float(ev.seconds[sel].sum()),
            executions=int(ev.value[sel].sum()), reads=dict(reads), library_call=lib,
            happens_at=Frame(inner[0], inner[1], inner[2], library=True) if inner else None,
            pending=pending, pending_known=known, event_steps=ev.step[sel],
            event_seconds=ev.seconds[sel]))
    out.sort(key=lambda s: (-s.seconds, -s.count))
    return out


def read_price(site: SyncSite, steady: np.ndarray, host: np.ndarray,
               waits: np.ndarray | None = None, reads: np.ndarray | None = None,
               basis: str = "steady") -> SyncSite:
    """``site`` priced over the steady steps (``steady``: a mask over the run's steps;
    ``host``: each step's own host time, :mod:`lazyscope.analyze.anatomy`): the waits of its
    reads in those steps, plus the overlap each step that read lost (the host's own work of
    that step, up to the step's wait: it ran while the device idled instead of beside it).
    ``waits``: each step's time in reads without the compilations that ran inside them (the
    anatomy's ``syncs``), shared among the step's sites by their seconds there (``reads``: all
    sites' read seconds per step); a compilation a read triggered is the recompile's cost, never
    the read's. A read in warm-up costs the price nothing."""
    n = len(steady)
    steps, seconds = site.event_steps, site.event_seconds
    ok = (steps >= 0) & (steps < n)
    steps, seconds = steps[ok].astype(np.int64), seconds[ok]
    keep = steady[steps]
    per_step = np.bincount(steps[keep], weights=seconds[keep], minlength=n)[:n]
    if waits is not None and reads is not None:
        share = np.divide(per_step, reads, out=np.zeros(n), where=reads > 0)
        per_step = np.minimum(per_step, waits * share)
    read = np.flatnonzero(per_step > 0)
    site.price_wait = float(per_step.sum())
    site.price_lost = float(np.minimum(per_step[read], host[read]).sum()) if len(read) else 0.0
    site.price = site.price_wait + site.price_lost
    site.price_basis = basis
    return site


def read_seconds_per_step(sites: list[SyncSite], n: int) -> np.ndarray:
    """Every site's read seconds summed per step (of ``n``)."""
    out = np.zeros(n)
    for site in sites:
        steps = site.event_steps
        ok = (steps >= 0) & (steps < n)
        out += np.bincount(steps[ok].astype(np.int64), weights=site.event_seconds[ok],
                           minlength=n)[:n]
    return out


def syncs_per_step(run: Run) -> np.ndarray:
    """Host syncs of each barrier step: the larger of its device-to-host transfers (where the
    backend counts them) and its user ``sync`` events (the two usually describe the same
    reads, so they are not added)."""
    n = len(run.steps)
    ev = run.events
    sel = ev.indices("sync")
    steps = ev.step[sel]
    steps = steps[(steps >= 0) & (steps < n)]
    counts = np.bincount(steps, minlength=n)[:n] if n else np.zeros(0, np.int64)
    transfers = run.steps.col("from_device_count")
    if transfers is not None:
        counts = np.maximum(counts, np.clip(transfers, 0, 2**62).astype(np.int64))
    return counts
