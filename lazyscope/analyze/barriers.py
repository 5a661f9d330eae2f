"""A loop with no step barrier: the pending graph grows with every iteration and is compiled
once, huge, where a value is read after the loop.

On XLA nothing runs until a barrier (``torch_xla.sync()``, ``xm.mark_step()``, the parallel
loader) or a read cuts the pending graph. A training loop without one traces every iteration's
forward, backward and update into one graph: compiled once, at the first read after the loop,
with the ops and inputs of all iterations (pytorch/xla #6948's out-of-memory; on a long run it
never fits). The run shows it as a graph compiled at a value read (not at a barrier) whose
instructions come from lines inside a loop that ends no step (the source says so:
:meth:`~lazyscope.analyze.findings.SourceLookup.loop_without_barrier`), in a run that reached
no barrier at all, or whose loop made a graph input per iteration (:data:`MIN_LOOP_INPUTS`: the
iterations piled up).

The finding is at the loop's line, with what the graph measured (ops, inputs, bytes, compile
seconds) and the fix: a barrier per iteration. Pure functions: no I/O.
"""

from __future__ import annotations

from collections import Counter

from lazyscope.analyze.events import pairs
from lazyscope.analyze.findings import BarrierFacts, Finding, SourceLookup
from lazyscope.analyze.wording import say
from lazyscope.core import units
from lazyscope.model import OWNER_USER, Compile, Frame, Run, user_site

#: in a run that reached barriers, a graph cut at a read is a loop's pile-up when the loop made
#: at least this many of its inputs (a tensor moved in per iteration)
MIN_LOOP_INPUTS = 3


def _lines(data: Compile, file: str) -> list[int]:
    """The user lines of ``file`` the graph's instructions and inputs were traced at."""
    out = {int(n) for f, n, _ in data.lines or [] if f == file}
    out |= {i.origin.line for i in data.inputs or [] if i.origin is not None
            and i.origin.file == file}
    return sorted(out)


def no_barrier_findings(backend: str, run: Run,
                        sources: SourceLookup | None) -> list[Finding]:
    """One finding per loop that ended no step while its iterations were traced into a graph
    compiled at a read (see the module docstring); the largest graph of each loop."""
    if not run.meta.capabilities.lazy:
        return []  # eager and torch.compile run each op or function as it is called
    ev = run.events
    idx, stacks, payloads, inverse = pairs(ev, "compile")
    steps = len(run.steps)
    found: dict[tuple[str, int], Finding] = {}
    for n, (sid, pid) in enumerate(zip(stacks.tolist(), payloads.tolist(), strict=True)):
        data = ev.payload_of(pid)
        if not isinstance(data, Compile) or data.owner != OWNER_USER or \
                data.cause_kind != "value_read" or data.phase != "graph":
            continue
        site = user_site(ev.stack_of(sid))
        if site is None:
            continue
        if sources is not None:
            loop = sources.loop_without_barrier(site.file, _lines(data, site.file), site.line)
        else:  # no source to read: a run with no barrier, inputs made at one line again
            loop = most_traced_line(data) if not steps else None
        if loop is None:
            continue
        inside = sum(1 for i in data.inputs or [] if i.origin is not None
                     and i.origin.file == loop.file
                     and loop.line <= i.origin.line < (site.line if site.file == loop.file
                                                       and site.line > loop.line else 1 << 30))
        if inside < MIN_LOOP_INPUTS and (steps or sources is None):
            continue
        at = idx[inverse == n]
        seconds = float(ev.seconds[at].max()) if len(at) else 0.0
        step = int(ev.step[at[0]]) if len(at) else 0
        ops = sum((data.ops or {}).values()) if data.ops else None
        memory = data.memory.total if data.memory is not None else None
        key = (loop.file, loop.line)
        old = found.get(key)
        if old is not None and isinstance(old.facts, BarrierFacts) and \
                (old.facts.ops or 0) >= (ops or 0):
            continue
        graph = ev.key_of(int(ev.key[at[0]])) if len(at) else ""
        facts = BarrierFacts(loop=loop, compiled_at=site, graph=graph[:16], ops=ops,
                             graph_inputs=data.num_inputs if data.num_inputs is not None
                             else len(data.inputs or []), memory_bytes=memory,
                             compile_seconds=seconds, loop_inputs=inside, run_steps=steps)
        detail = say(backend, "no_barrier_detail", loop=str(loop), site=str(site),
                     ops=units.count(ops) if ops is not None else "?",
                     inputs=units.count(facts.graph_inputs or 0),
                     memory=f", holding {units.nbytes(memory)}" if memory else "",
                     seconds=units.seconds(seconds),
                     made=(say(backend, "no_barrier_made", n=inside) if inside else ""),
                     steps=say(backend, "no_barrier_steps") if not steps else "")
        found[key] = Finding(
            kind="no_barrier", file=loop.file, line=loop.line, function=loop.function,
            stack=[loop], count=1, steps=[step], step_count=1, seconds=seconds,
            detail=detail, fix=say(backend, "no_barrier_fix", loop=str(loop)), facts=facts)
    return list(found.values())


def most_traced_line(data: Compile) -> Frame | None:
    """The user line most of a graph's inputs were made at (where the source cannot be read:
    the loop's body, each iteration making its inputs); None when they carry no line."""
    origins = Counter((i.origin.file, i.origin.line) for i in data.inputs or []
                      if i.origin is not None)
    if not origins:
        return None
    (file, line), _ = origins.most_common(1)[0]
    return Frame(file, line)


__all__ = ["MIN_LOOP_INPUTS", "no_barrier_findings"]
