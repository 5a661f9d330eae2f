"""lazyscope: a performance debugger for PyTorch/XLA LazyTensor programs.

Library API::

    import lazyscope
    with lazyscope.trace("runs/mine") as t:      # before the first torch_xla.sync()
        for batch in loader:
            ...
            torch_xla.sync()
    run = lazyscope.load_run("runs/mine")
    print(lazyscope.report(run))

Importing lazyscope imports neither torch_xla nor matplotlib.
"""

from __future__ import annotations

import os
from typing import Any

from lazyscope.model import Run, load_run
from lazyscope.runner import Tracer

__version__ = "0.1.0"
__all__ = ["Run", "Tracer", "__version__", "barrier", "load_run", "report", "trace"]


def trace(
    out: str | os.PathLike[str],
    *,
    backend: str = "xla",
    steps: int | None = None,
    force: bool = False,
    name: str = "",
    graph_shapes: bool = True,
) -> Tracer:
    """A context manager that traces the code inside it into the run directory ``out``.

    Steps are the program's own barriers (``torch_xla.sync()``, ``xm.mark_step()``,
    ``xp.StepTrace``, the parallel loader). Enter it before the first barrier so compilation
    causes are captured. ``steps`` stops the loop after that many barriers.
    ``graph_shapes=False`` skips XLA's HLO dump of each compiled graph (written at compile time
    only; without it recompilations are not diffed by input shape). It takes effect only if
    torch_xla has not compiled anything in this process yet (XLA reads ``XLA_FLAGS`` once).
    """
    import inspect

    caller = inspect.stack()[1].filename
    tracer = Tracer(out, backend=backend, max_steps=steps, force=force,
                    target=name or caller, target_kind="api")
    if hasattr(tracer.backend, "graph_shapes"):
        tracer.backend.graph_shapes = graph_shapes
        tracer.meta.info["graph_shapes"] = graph_shapes
    return tracer


def report(run: Run | str | os.PathLike[str], fmt: str = "text") -> Any:
    """Render a run (or a run directory) as ``text`` or ``json`` (a string)."""
    from lazyscope.render import RENDERERS

    if not isinstance(run, Run):
        run = load_run(run)
    return RENDERERS[fmt](run)


def barrier() -> None:
    """End a step of a program traced with ``--backend eager|compile`` (see
    :mod:`lazyscope.backends.torch_backend`): waits for CUDA, records the step; untraced it only
    waits. XLA programs use their own barrier, ``torch_xla.sync()``."""
    from lazyscope.backends.torch_backend import barrier as _barrier

    _barrier()
