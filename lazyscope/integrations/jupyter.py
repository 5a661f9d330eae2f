"""The ``%%lazyscope`` cell magic: trace a notebook cell and show its report inline.

::

    %load_ext lazyscope
    %%lazyscope [--out DIR] [--backend xla|eager|compile|torchax] [--device auto|cpu|cuda]
                [--steps N] [--force] [--no-graph-shapes]
    for batch in loader:
        ...

The cell runs in the notebook's namespace under the same machinery as ``lazyscope.trace()``
(:func:`lazyscope.backends.runner.api_tracer`) and writes a normal run directory (default
``runs/cell<N>-TIMESTAMP``, ``N`` the cell's execution count). Its code is named
``cell In[N]`` and numbered as the cell shows, so a finding reads ``cell In[7]:13``. The magic returns the
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
import linecache
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import lazyscope.render.renderers  # noqa: F401 - registers how a Report shows itself in a notebook
from lazyscope.analyze.hosts import build_any
from lazyscope.analyze.report import Report
from lazyscope.backends import BACKENDS
from lazyscope.backends.base import TraceOptions
from lazyscope.backends.runner import Tracer, api_tracer
from lazyscope.core.errors import LazyscopeError, UsageError
from lazyscope.core.numbers import BadNumber, parse_int
from lazyscope.model.ownership import add_own_file, is_library_file
from lazyscope.store import load_target

MAGIC = "lazyscope"
#: plain IPython's name for a cell's code
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, no usage block, no SystemExit
        raise UsageError(f"%%{MAGIC}: {message}")


def _steps(text: str) -> int:
    """``--steps N`` through the one number parser (:mod:`lazyscope.core.numbers`)."""
    try:
        return parse_int(text, minimum=1)
    except BadNumber as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"%%{MAGIC}", add_help=False)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--backend", choices=sorted(BACKENDS), default="xla")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--steps", type=_steps, default=None)
    p.add_argument("--force", action="store_true")
    p.add_argument("--no-graph-shapes", dest="graph_shapes", action="store_false")
    return p


def default_out(cell: int) -> Path:
    return Path("runs") / f"cell{cell}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def cell_file(number: int) -> str:
    """The file name a traced cell's code runs under: what reports show as its file."""
    return f"cell In[{number}]"


def _compile(shell: Any, cell: str, number: int) -> Any:
    """The cell's code as IPython would run it (its own magics and shell escapes transformed),
    named ``cell In[N]`` and numbered as the cell shows (line 1 is the ``%%lazyscope`` line),
    its source in linecache for tracebacks. ipykernel's own name for a cell,
    ``/tmp/ipykernel_<pid>/<hash>.py``, would mean nothing in a saved run."""
    source = "\n" + shell.transform_cell(cell)
    name = cell_file(number)
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    return shell.compile(source, name, "exec")


def _magic_caller(shell: Any) -> str:
    """The file of the code that called the magic: the ``%%lazyscope`` cell as IPython
    compiled it (a ``run_cell_magic`` call). That code is the magic's, not the user's: it would
    be every finding's "called from", so it is marked as lazyscope's own when it is a cell (no
    file on disk), never a real file."""
    cells = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}

    def is_cell(name: str) -> bool:
        return name in cells or bool(_IPYTHON_INPUT.match(name))

    frame: Any = sys._getframe(1)
    while frame is not None and is_library_file(frame.f_code.co_filename) and \
            not is_cell(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    if not os.path.exists(frame.f_code.co_filename):
        add_own_file(frame.f_code.co_filename)
    return str(frame.f_code.co_filename)


def cell_number(shell: Any, caller: str) -> int:
    """The ``N`` of ``In[N]`` of the cell running now: IPython 8+ maps the cell's compiled file
    name to it (``compile._filename_map``; its ``execution_count`` already counts the next
    cell); plain IPython names it ``<ipython-input-N-hash>``; IPython 7 (Colab's) counts it in
    ``execution_count`` until the cell ends."""
    found = (getattr(getattr(shell, "compile", None), "_filename_map", None) or {}).get(caller)
    if isinstance(found, int):
        return found
    match = _IPYTHON_INPUT.match(caller)
    if match:
        return int(match.group(1))
    return int(getattr(shell, "execution_count", 0) or 0)


def run_cell(shell: Any, line: str, cell: str) -> Report | None:
    """Trace ``cell`` (the body of a ``%%lazyscope`` cell) in ``shell``'s namespace; return
    its report, or None after printing the one line of a refused start."""
    __tracebackhide__ = True  # noqa: F841 - IPython's tracebacks show the cell, not the magic
    number = cell_number(shell, _magic_caller(shell))
    try:
        args = parser().parse_args(shlex.split(line))
        if args.steps is not None and args.steps < 1:
            raise UsageError(f"%%{MAGIC}: --steps must be at least 1, got {args.steps}")
        options = TraceOptions(backend=args.backend, device=args.device,
                               graph_shapes=args.graph_shapes, max_steps=args.steps)
        tracer = api_tracer(args.out or default_out(number), options=options, force=args.force,
                            target=f"notebook cell In[{number}]")
        code = _compile(shell, cell, number)
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
        __tracebackhide__ = True  # noqa: F841 - see run_cell
        return run_cell(ipython, line, cell)

    lazyscope_magic.__doc__ = __doc__
    ipython.register_magic_function(lazyscope_magic, magic_kind="cell", magic_name=MAGIC)


__all__ = ["Tracer", "load_ipython_extension", "run_cell"]
