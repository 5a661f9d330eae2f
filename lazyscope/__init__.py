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
backends. Each is a no-op when nothing is traced. Importing lazyscope imports neither torch_xla
nor matplotlib.
"""

from __future__ import annotations

import os
from typing import Any

from lazyscope.model import Run, load_run
from lazyscope.runner import Tracer

__version__ = "0.2.0"
__all__ = ["Run", "Tracer", "__version__", "annotate_step", "barrier", "load_run", "note",
           "report", "set_info", "trace"]


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
    from lazyscope.runner import ranked_out

    caller = inspect.stack()[1].filename
    options = TraceOptions(backend=backend, device=device, graph_shapes=graph_shapes,
                           max_steps=steps, warmup_steps=warmup_steps)
    run_dir, rank, world = ranked_out(out)
    return Tracer(run_dir, options=options, force=force, target=name or caller,
                  target_kind="api", rank=rank, world_size=world)


def report(run: Run | str | os.PathLike[str], fmt: str = "text") -> Any:
    """Render a run (a run directory, or a multi-process run's directory) as ``text``,
    ``json`` or ``html`` (a string; the HTML page has its plots inline, written into the run
    directory on the way)."""
    from pathlib import Path

    from lazyscope.analyze.report import build_any
    from lazyscope.render import RENDERERS
    from lazyscope.store import load_target

    target = run if isinstance(run, Run) else load_target(run)
    built = build_any(target)
    if fmt == "html":
        from lazyscope.render.html import render_html
        from lazyscope.render.views import write_plots

        images, _ = write_plots(built, Path(built.run_dir))
        return render_html(built, images)
    return RENDERERS[fmt](built)


def annotate_step(**values: Any) -> None:
    """Attach values (``real_tokens=``, ``seq_len=`` ...) to the step in progress of the active
    trace; a no-op when nothing is traced."""
    from lazyscope.backends.base import active

    trace_ = active()
    if trace_ is not None:
        trace_.recorder.annotate(**values)


def set_info(**values: Any) -> None:
    """Attach run-wide values to the active trace's ``meta.json``; a no-op when not traced."""
    from lazyscope.backends.base import active

    trace_ = active()
    if trace_ is not None:
        trace_.recorder.set_info(**values)


def note(text: str) -> None:
    """Add a line to the active trace's notes (every report shows it); a no-op when not
    traced."""
    from lazyscope.backends.base import active

    trace_ = active()
    if trace_ is not None:
        trace_.recorder.note(text)


def barrier() -> None:
    """End a step of a program traced with ``--backend eager|compile``: waits for CUDA when it
    is in use and records the step; untraced it only waits. XLA programs use their own
    barrier (``torch_xla.sync()``); there this is a no-op."""
    from lazyscope.backends.base import active

    trace_ = active()
    if trace_ is not None:
        trace_.collector.on_user_barrier()
    else:
        from lazyscope.backends.torch_backend import synchronize

        synchronize(None)
