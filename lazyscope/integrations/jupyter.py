"""The ``%%lazyscope`` cell magic: trace a notebook cell and show its report inline.

::

    %load_ext lazyscope
    %%lazyscope [--out DIR] [--backend xla|eager|compile] [--device auto|cpu|cuda]
                [--steps N] [--force] [--no-graph-shapes]
    for batch in loader:
        ...

The cell runs in the notebook's namespace under the same machinery as ``lazyscope.trace()``
(:func:`lazyscope.runner.api_tracer`) and writes a normal run directory (default
``runs/cell<N>-TIMESTAMP``, ``N`` the cell's execution count). The magic returns the
:class:`~lazyscope.analyze.report.Report`, so the cell's output is the report as an HTML
fragment (``Report._repr_html_``: no ``<html>``, every CSS rule scoped to
``.lazyscope-report``) and ``_`` holds it. A bad option or a run directory that exists without
``--force`` is one ``lazyscope: ...`` line on stderr, nothing runs. An exception in the cell is
recorded (status ``failed``), the report of what ran is shown, and the exception is raised as
usual. IPython is imported by IPython itself: this module imports nothing of it.

As with ``lazyscope.trace()``, on XLA the first traced cell should run before anything else
touched the XLA device (XLA reads its dump flags once per process), and compilations are
cached for the whole kernel: a cell traced twice compiles nothing the second time.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import sys
from pathlib import Path
from typing import Any

import lazyscope.render  # noqa: F401 - registers how a Report shows itself in a notebook
from lazyscope.analyze.ranks import build_any
from lazyscope.analyze.report import Report
from lazyscope.backends import BACKENDS
from lazyscope.backends.base import TraceOptions
from lazyscope.errors import LazyscopeError, UsageError
from lazyscope.runner import Tracer, api_tracer
from lazyscope.store import load_target

MAGIC = "lazyscope"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, no usage block, no SystemExit
        raise UsageError(f"%%{MAGIC}: {message}")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"%%{MAGIC}", add_help=False)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--backend", choices=sorted(BACKENDS), default="xla")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--force", action="store_true")
    p.add_argument("--no-graph-shapes", dest="graph_shapes", action="store_false")
    return p


def default_out(cell: int) -> Path:
    return Path("runs") / f"cell{cell}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_cell(shell: Any, line: str, cell: str) -> Report | None:
    """Trace ``cell`` (the body of a ``%%lazyscope`` cell) in ``shell``'s namespace; return
    its report, or None after printing the one line of a refused start."""
    number = int(getattr(shell, "execution_count", 0) or 0)
    try:
        args = parser().parse_args(shlex.split(line))
        if args.steps is not None and args.steps < 1:
            raise UsageError(f"%%{MAGIC}: --steps must be at least 1, got {args.steps}")
        options = TraceOptions(backend=args.backend, device=args.device,
                               graph_shapes=args.graph_shapes, max_steps=args.steps)
        tracer = api_tracer(args.out or default_out(number), options=options, force=args.force,
                            target=f"notebook cell In[{number}]")
        # compiled as IPython compiles a cell: its magics transformed, its source in linecache
        # (tracebacks and frames show the cell's lines)
        source = shell.transform_cell(cell)
        filename = shell.compile.cache(source, number)
        code = shell.compile(source, filename, "exec")
    except LazyscopeError as err:
        print(f"lazyscope: {err}", file=sys.stderr)
        return None
    except SyntaxError:
        shell.showsyntaxerror()
        return None
    try:
        with tracer:
            exec(code, shell.user_ns)  # noqa: S102 - the user's own cell
    except LazyscopeError as err:  # lazyscope's own refusal at the start (the run dir exists)
        if tracer.writer is None:
            print(f"lazyscope: {err}", file=sys.stderr)
            return None
        raise
    except BaseException:
        if tracer.writer is not None:
            print(f"lazyscope: the cell raised; the run so far is kept in {tracer.out} "
                  f"(status {tracer.status})", file=sys.stderr)
            _show(build_any(load_target(tracer.out)))
        raise
    print(f"run saved in {tracer.out}")
    return build_any(load_target(tracer.out))


def _show(report: Report) -> None:
    from IPython.display import display  # IPython is there: this runs inside it

    display(report)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lazyscope``: register the ``%%lazyscope`` cell magic."""

    def lazyscope_magic(line: str, cell: str) -> Report | None:
        return run_cell(ipython, line, cell)

    lazyscope_magic.__doc__ = __doc__
    ipython.register_magic_function(lazyscope_magic, magic_kind="cell", magic_name=MAGIC)


__all__ = ["Tracer", "load_ipython_extension", "run_cell"]
