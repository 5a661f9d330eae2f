"""lazyscope: a performance debugger for PyTorch/XLA LazyTensor programs.

Library API::

    import lazyscope
    with lazyscope.trace("runs/mine"):           # before the first torch_xla.sync()
        for batch in loader:
            ...
            torch_xla.sync()
    print(lazyscope.report("runs/mine"))

A program (a built-in scenario is one too) talks to the trace in progress through
:func:`annotate_step` (values for the step now in progress), :func:`note` (a line about the run)
and :func:`set_info` (run-wide values); :func:`barrier` ends a step on the eager/compile
backends. Each is a no-op when nothing is traced. A workload that runs on every backend asks
:func:`tracing` what the trace in progress runs on and :func:`runtime` for the device and step
barrier of a backend (the built-in scenarios do). Importing lazyscope imports neither torch_xla
nor matplotlib.

In a notebook, ``%load_ext lazyscope`` adds the ``%%lazyscope`` cell magic (trace the cell, show
its report; :mod:`lazyscope.integrations.jupyter`); a ``Report`` shows itself as HTML. Hugging
Face ``Trainer`` users add :class:`lazyscope.integrations.transformers.LazyscopeCallback`.

The modules :mod:`lazyscope.core.errors` (errors and exit codes), :mod:`lazyscope.core.padding` (padding
and packing policies) and :mod:`lazyscope.data` (collate functions and samplers for them; it
imports torch, so ``import lazyscope`` does not import it) are public too; :func:`advise` ranks
the policies for a stream of lengths.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lazyscope.core.errors import GuardError
from lazyscope.core.values import host_values, note_text

if TYPE_CHECKING:
    from lazyscope.analyze.buckets import Advice
    from lazyscope.backends.base import ActiveTrace, Runtime, TraceOptions
    from lazyscope.backends.runner import Tracer
    from lazyscope.backends.xla.runtime import default_pjrt_device
    from lazyscope.integrations.jupyter import load_ipython_extension
    from lazyscope.model import Run
    from lazyscope.store import load_run

#: names imported when first used: ``import lazyscope`` (which every command runs first) loads
#: no backend, no store, no analysis, so a command pays only for what it uses
_LAZY = {"Advice": ("lazyscope.analyze.buckets", "Advice"),
         "load_ipython_extension": ("lazyscope.integrations.jupyter", "load_ipython_extension"),
         "Run": ("lazyscope.model", "Run"),
         "Runtime": ("lazyscope.backends.base", "Runtime"),
         "TraceOptions": ("lazyscope.backends.base", "TraceOptions"),
         "Tracer": ("lazyscope.backends.runner", "Tracer"),
         "default_pjrt_device": ("lazyscope.backends.xla.runtime", "default_pjrt_device"),
         "load_run": ("lazyscope.store", "load_run")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lazyscope' has no attribute {name!r}")

__version__ = "0.3.0"
__all__ = ["Advice", "GuardError", "Run", "Runtime", "TraceOptions", "Tracer", "__version__",
           "advise", "annotate_step", "backend_names", "barrier", "default_pjrt_device", "guard",
           "load_ipython_extension", "load_run", "note", "report", "runtime", "set_info", "trace",
           "tracing"]


def trace(
    out: str | os.PathLike[str],
    *,
    backend: str = "xla",
    steps: int | None = None,
    force: bool = False,
    name: str = "",
    graph_shapes: bool = True,
    device: str = "auto",
    warmup_steps: int | None = None,
) -> Tracer:
    """A context manager that traces the code inside it into the run directory ``out``.

    Steps are the program's own barriers (``torch_xla.sync()``, ``xm.mark_step()``,
    ``torch_xla.step()``, ``xp.StepTrace``, the parallel loader) on XLA, and
    :func:`barrier` on the eager/compile backends. Enter it before the first barrier so
    compilation causes are captured. ``steps`` stops the loop after that many barriers.
    ``graph_shapes=False`` skips XLA's HLO dump of each compiled graph (written at compile time
    only; without it recompilations are not diffed by input shape). It takes effect only if
    torch_xla has not compiled anything in this process yet (XLA reads ``XLA_FLAGS`` once).
    """
    import inspect

    from lazyscope.backends.base import TraceOptions
    from lazyscope.backends.runner import api_tracer

    caller = inspect.stack()[1].filename
    options = TraceOptions(backend=backend, device=device, graph_shapes=graph_shapes,
                           max_steps=steps, warmup_steps=warmup_steps)
    return api_tracer(out, options=options, force=force, target=name or caller)


def guard(*, max_recompiles: int | None = 0, warmup_steps: int | None = 2,
          max_syncs_per_step: int | None = None, no_fallbacks: bool = False,
          no_graph_breaks: bool = False, max_input_share: float | None = None,
          max_tracing_share: float | None = None, backend: str = "auto",
          out: str | os.PathLike[str] | None = None, force: bool = False) -> Any:
    """A guard around a loop or a test: raises :class:`GuardError` at the step barrier where a
    rule breaks, its message the finding (the user's line to change, why, the fix)::

        with lazyscope.guard(max_recompiles=0, warmup_steps=2):
            for batch in loader:
                ...
                torch_xla.sync()        # GuardError here at the first recompilation

    It is also a decorator (``@lazyscope.guard(...)``). The rules are ``lazyscope check``'s,
    applied as the program runs with the report's own analysis: ``max_recompiles`` (every
    compilation from step ``warmup_steps`` on counts; ``warmup_steps=None``: the analysis finds
    the warm-up and only a site that keeps compiling counts), ``max_syncs_per_step`` (host
    syncs in a step after the warm-up), ``no_fallbacks``, ``no_graph_breaks``,
    ``max_input_share`` / ``max_tracing_share`` (the steady step's share waiting for data / on
    the host's own work, 0..1: judged every 10 steps after the warm-up and at the end); None or
    False checks nothing. Steps are the program's barriers on XLA (``torch_xla.sync()``,
    ``xm.mark_step()`` ...) and :func:`barrier` with torch.compile (``backend="compile"``, the
    default when torch_xla is not imported; compilations come from dynamo's own compile
    events); what ran after the last barrier is judged when the block ends. The block is traced
    as :func:`trace` traces it, into a temporary directory removed at the end: ``out=`` keeps
    the run there (``force``: replace one). Enter it before the program's first barrier (on XLA,
    before its first compilation: torch_xla reads its debug settings then); it cannot be entered
    inside another trace of the same process."""
    import sys

    from lazyscope.integrations.live import make_guard

    return make_guard(max_recompiles=max_recompiles, warmup_steps=warmup_steps,
                      max_syncs_per_step=max_syncs_per_step, no_fallbacks=no_fallbacks,
                      no_graph_breaks=no_graph_breaks, max_input_share=max_input_share,
                      max_tracing_share=max_tracing_share, backend=backend, out=out,
                      force=force, target=sys._getframe(1).f_code.co_filename)


def report(run: Run | str | os.PathLike[str], fmt: str = "text", *,
           fragment: bool = False) -> Any:
    """Render a run (a run directory, or a multi-process run's directory) as ``text``,
    ``json`` or ``html`` (a string; the HTML page has its plots inline, written into the run
    directory on the way). ``fragment=True``: HTML to embed in another page, a notebook's
    output (``display(HTML(...))``), with no global style and no ``<html>`` of its own."""
    from pathlib import Path

    from lazyscope.analyze.hosts import build_any
    from lazyscope.model import Run
    from lazyscope.model.source_files import SOURCES
    from lazyscope.render import RENDERERS
    from lazyscope.store import load_target

    target = run if isinstance(run, Run) else load_target(run)
    built = build_any(target, sources=SOURCES)
    if fmt == "html":
        from lazyscope.render.html import render_html
        from lazyscope.render.views import write_plots

        images, _ = write_plots(built, Path(built.run_dir))
        return render_html(built, images, fragment=fragment)
    return RENDERERS[fmt](built)


def _active() -> ActiveTrace | None:
    """The trace in progress in this process: none before lazyscope's backends are imported
    (every trace imports them), so a program that is not traced imports nothing more."""
    base = sys.modules.get("lazyscope.backends.base")
    return base.active() if base is not None else None


def annotate_step(**values: Any) -> None:
    """Attach values (``real_tokens=``, ``seq_len=`` ...) to the step in progress of the active
    trace; a no-op when nothing is traced. Values are host values: numbers, strings, lists and
    dicts of them; a tensor is refused (UsageError), never read (see :mod:`lazyscope.core.values`)."""
    trace_ = _active()
    if trace_ is not None:
        trace_.recorder.annotate(**host_values("lazyscope.annotate_step", values))


def set_info(**values: Any) -> None:
    """Attach run-wide values to the active trace's ``meta.json``; a no-op when not traced.
    Host values only, as :func:`annotate_step`."""
    trace_ = _active()
    if trace_ is not None:
        trace_.recorder.set_info(**host_values("lazyscope.set_info", values))


def note(text: str) -> None:
    """Add a line to the active trace's notes (every report shows it); a no-op when not
    traced."""
    trace_ = _active()
    if trace_ is not None:
        trace_.recorder.note(note_text(text))


def barrier() -> None:
    """End a step of a program traced with ``--backend eager|compile``: waits for CUDA when it
    is in use and records the step; untraced it only waits. XLA programs use their own
    barrier (``torch_xla.sync()``); there this is a no-op."""
    trace_ = _active()
    if trace_ is not None:
        trace_.collector.on_user_barrier()
    else:
        from lazyscope.backends.pytorch.collector import synchronize

        synchronize(None)


def backend_names() -> list[str]:
    """The backends lazyscope can trace on (``xla``, ``eager``, ``compile``)."""
    from lazyscope.backends import BACKENDS

    return sorted(BACKENDS)


def tracing() -> TraceOptions | None:
    """How the trace in progress in this process runs (its ``backend``, ``device``, ``dynamic``
    ...), or None when nothing is traced. Read-only."""
    trace_ = _active()
    return trace_.options if trace_ is not None else None


def runtime(backend: str | None = None, *, device: str | None = None,
            dynamic: bool | None = None) -> Runtime:
    """What a workload runs on: ``runtime.device()``, ``runtime.barrier()`` (the end of a step),
    ``runtime.step(i)`` (a region that ends at one), ``runtime.region(name)`` (a profiler
    annotation) and ``runtime.prepare_model(model)`` (``torch.compile`` on the compile backend).

    ``backend`` defaults to the trace in progress (else ``xla``); ``device`` (``auto``, ``cpu``,
    ``cuda``) and ``dynamic`` (torch.compile's ``dynamic=``) apply to the eager/compile backends
    and default to the trace's own."""
    from lazyscope.backends import get_runtime

    options = tracing()
    name = backend or (options.backend if options is not None else "xla")
    if name == "xla":
        return get_runtime("xla")
    if device is None:
        device = options.device if options is not None else "auto"
    if dynamic is None and options is not None:
        dynamic = options.dynamic
    return get_runtime(name, device=device, dynamic=dynamic)


def advise(lengths: Sequence[int], *, batch: int, max_len: int, horizon: int | None = None,
           max_buckets: int = 8, grouped: bool = False, packing: bool = True,
           dims: Mapping[str, Any] | None = None) -> Advice:
    """The advisor's ranking of padding policies for a stream of sequence ``lengths`` before
    anything ran (the scenarios' ``auto`` and ``bucket:auto`` policies): batches of ``batch``
    sequences, at most ``max_len`` tokens, over ``horizon`` steps (default
    :data:`lazyscope.analyze.buckets.DEFAULT_HORIZON`, a long training run). Costs come from a
    model of the network's ``dims`` (``dim``, ``layers``, ``vocab``: see
    :func:`lazyscope.analyze.buckets.cost_model_from_info`) and a prior compile cost; ``lazyscope
    advise RUN`` calibrates them on a traced run instead. ``grouped``: the batches are
    length-grouped; ``packing=False``: the model cannot take packed rows.
    ``advice.recommended.policy`` is the :class:`lazyscope.core.padding.Policy` to run
    (:func:`lazyscope.data.collate_for` builds its collator)."""
    from lazyscope.analyze.buckets import advise as _advise
    from lazyscope.analyze.buckets import cost_model_from_info, prior_model

    if max(lengths, default=0) > max_len:
        raise ValueError(f"length {max(lengths)} is longer than max_len {max_len}")
    model = prior_model(cost_model_from_info(dict(dims or {})), batch, max_len)
    return _advise(list(lengths), batch=batch, top=max_len, max_buckets=max_buckets,
                   grouped=grouped, horizon=horizon, model=model, packing=packing)
