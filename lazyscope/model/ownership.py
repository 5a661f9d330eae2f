"""Which frames are the user's, and the bounded stacks that events keep.

A frame is *library* code when its file lies in:

* lazyscope's own package;
* the standard library;
* a directory distributions are installed into: the interpreter's site directories, its
  scripts directory (console scripts such as ``lazyscope``, ``torchrun``, ``accelerate``), and
  any ``sys.path`` entry that holds ``*.dist-info`` (a ``pip install --target`` or
  ``PYTHONPATH`` directory, Colab's ``/usr/local/lib/python3.X/dist-packages``); any path
  with a ``site-packages`` or ``dist-packages`` part (another environment's packages);
* a source checkout of torch or torch_xla (an editable install is not under site-packages).

The traced program's own root (the script's directory, a built-in scenario's package) is the
user's even when it is installed: :func:`set_user_roots`. Where a user root and a library
directory nest, the deeper one decides (a virtual environment inside the user's project is
still library code).

The user's line of an event is its innermost non-library frame, so a third-party frame (a
Hugging Face model's forward, say) is never reported as the line to change: the user's call
into it is. :func:`capture_stack` walks the Python stack without building a traceback and keeps
what events store: the few library frames just inside the innermost user frame (which torch or
torch_xla call was running) and the user frames outward, bounded (``benchmarks/scale.py``: full
stacks made events 25x larger).

:func:`source_map` records, when a run ends, what its user frames point at
(:class:`~lazyscope.model.frames.SourceMap`): the text of each line (``linecache``, which also
holds a notebook cell's source), and for a file that is a Jupyter/IPython cell
(``/tmp/ipykernel_<pid>/<hash>.py``, ``<ipython-input-N-...>``) its label, ``cell In[N]``
(:func:`cell_number`; the kernel is alive only while the run is made). Pure standard library.
"""

from __future__ import annotations

import builtins
import functools
import linecache
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lazyscope.model import Frame, SourceMap, Stack

#: lazyscope's own package (this file is lazyscope/model/ownership.py)
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
#: path parts that mark installed or framework code wherever it is
_LIBRARY_PARTS = (
    f"{os.sep}site-packages{os.sep}",
    f"{os.sep}dist-packages{os.sep}",
    # source checkouts of the frameworks (an editable install is not under site-packages)
    f"{os.sep}torch_xla{os.sep}",
    f"{os.sep}torch{os.sep}",
    f"{os.sep}torchdynamo{os.sep}",
    f"{os.sep}typing_extensions.py",
)
#: library frames kept just inside the innermost user frame (which library API the user called)
LEADING_LIBRARY_FRAMES = 6
#: library frames kept at the inner end of the stack (where a cost inside a library happens,
#: e.g. transformers/masking_utils.py find_packed_sequence_indices, many calls below the user's
#: trainer.train())
INNER_LIBRARY_FRAMES = 3
#: user frames kept per event
MAX_USER_FRAMES = 24

_user_roots: tuple[str, ...] = ()
_own_files: set[str] = set()


def _dir(path: str) -> str:
    try:
        return str(Path(path).resolve()) + os.sep
    except (OSError, RuntimeError):
        return os.path.abspath(path) + os.sep


def _holds_distributions(path: str) -> bool:
    try:
        return any(name.endswith(".dist-info") for name in os.listdir(path))
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def library_roots() -> tuple[str, ...]:
    """The directories whose files are library code (see the module docstring), resolved."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib",
                                       "scripts")}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - an old virtualenv's site module
        pass
    roots.add(site.getusersitepackages() if site.ENABLE_USER_SITE else "")
    roots.update(p for p in sys.path if p and os.path.isdir(p) and _holds_distributions(p))
    return tuple(sorted({_dir(r) for r in roots if r}))


def set_user_roots(paths: list[str | os.PathLike[str]]) -> None:
    """Declare the traced program's own directories user code, even where they are installed
    (a built-in scenario in site-packages). Called by the runner before the program starts."""
    global _user_roots
    _user_roots = tuple(sorted({_dir(str(p)) for p in paths}))
    is_library_file.cache_clear()


def add_own_file(path: str | os.PathLike[str]) -> None:
    """A file that is lazyscope's own although it lies elsewhere (the ``lazyscope`` console
    script that started this process)."""
    try:
        _own_files.add(str(Path(path).resolve()))
    except (OSError, RuntimeError):
        return
    is_library_file.cache_clear()


def _deepest(resolved: str, roots: tuple[str, ...]) -> int:
    return max((len(r) for r in roots if resolved.startswith(r)), default=-1)


@functools.lru_cache(maxsize=8192)
def is_library_file(file: str) -> bool:
    """True for frames of lazyscope itself, the standard library, installed distributions and
    the frameworks' checkouts (see the module docstring). Cached per file name: it resolves the
    path, and runs for every frame walked at each value read and fallback call during a
    trace."""
    if not file or file.startswith("<"):
        return True
    try:
        resolved = str(Path(file).resolve())
    except (OSError, RuntimeError):
        resolved = file
    if resolved.startswith(_PACKAGE_DIR) or resolved in _own_files:
        return True
    user = _deepest(resolved, _user_roots)
    library = _deepest(resolved, library_roots())
    if user >= 0 and user > library:
        return False
    if library >= 0:
        return True
    return any(part in resolved for part in _LIBRARY_PARTS)


def is_lazyscope_file(file: str) -> bool:
    """True for lazyscope's own code: frames a report never shows."""
    try:
        resolved = str(Path(file).resolve())
    except (OSError, RuntimeError):
        resolved = file
    return resolved.startswith(_PACKAGE_DIR) or resolved in _own_files


def make_frame(file: str, line: int, function: str = "") -> Frame:
    """A frame, classified."""
    return Frame(file, int(line or 0), function, is_library_file(file))


def _library_ends(lead: list[Frame]) -> list[Frame]:
    """The library frames an event keeps of those inside the innermost user frame (innermost
    first): the INNER_LIBRARY_FRAMES where it happens and the LEADING_LIBRARY_FRAMES the user's
    call entered; the calls in between are dropped."""
    if len(lead) <= INNER_LIBRARY_FRAMES + LEADING_LIBRARY_FRAMES:
        return lead
    return lead[:INNER_LIBRARY_FRAMES] + lead[-LEADING_LIBRARY_FRAMES:]


def bound_stack(frames: list[Frame]) -> Stack:
    """What an event keeps of a stack (innermost first): of the library frames before the first
    user frame, the innermost INNER_LIBRARY_FRAMES and the LEADING_LIBRARY_FRAMES next to the
    user frame; then the user frames (at most MAX_USER_FRAMES). A stack without user frames
    keeps its innermost LEADING_LIBRARY_FRAMES frames."""
    first_user = next((i for i, f in enumerate(frames) if not f.library), None)
    if first_user is None:
        return tuple(frames[:LEADING_LIBRARY_FRAMES])
    lead = _library_ends(frames[:first_user])
    users: list[Frame] = []
    for f in frames[first_user:]:
        # the watch window's trampoline repeats its caller's frame (xla_watch.trampoline)
        if not f.library and (not users or users[-1] != f):
            users.append(f)
            if len(users) >= MAX_USER_FRAMES:
                break
    return tuple(lead + users)


def is_own_file(file: str) -> bool:
    """A file of lazyscope's own package."""
    try:
        return str(Path(file).resolve()).startswith(_PACKAGE_DIR)
    except (OSError, RuntimeError):
        return False


def capture_stack(skip: int = 1, *, above: Callable[[str], bool] | None = None) -> Stack:
    """The caller's stack (``skip`` frames above this call), bounded as :func:`bound_stack`;
    with ``above``, the innermost frames whose file it holds true for are left out too (the
    machinery that reported an event, rather than the code it happened in).

    Walks frames directly (no traceback objects, no source lines read)."""
    try:
        f: Any = sys._getframe(skip + 1)
    except ValueError:  # a shallow stack (the autograd engine's thread)
        return ()
    while above is not None and f is not None and above(f.f_code.co_filename):
        f = f.f_back
    lead: list[Frame] = []
    users: list[Frame] = []
    while f is not None and len(users) < MAX_USER_FRAMES:
        code = f.f_code
        library = is_library_file(code.co_filename)
        if not library:
            frame = Frame(code.co_filename, f.f_lineno, code.co_name, False)
            if not users or users[-1] != frame:  # a trampoline repeats its caller
                users.append(frame)
        elif not users:
            lead.append(Frame(code.co_filename, f.f_lineno, code.co_name, True))
        f = f.f_back
    return tuple(_library_ends(lead) + users) if users else \
        tuple(lead[:LEADING_LIBRARY_FRAMES])


def frames_from_summary(stack: Any) -> list[Frame]:
    """Classified frames, innermost first, from a traceback ``StackSummary`` (outermost first)."""
    return [make_frame(str(fr.filename), int(fr.lineno or 0), str(fr.name))
            for fr in reversed(list(stack or []))]


#: a plain IPython (and older Colab) cell: ``<ipython-input-3-1a2b3c4d5e6f>``
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")


def cell_number(filename: str) -> int | None:
    """The execution number of the Jupyter/IPython cell compiled as ``filename``, or None
    (not in IPython, or not a cell). IPython 8+ keeps a map from the file name ipykernel gave a
    cell to its number; IPython 7 (Colab's runtime) does not, so the cell's text, which
    ``linecache`` holds, is looked up in the input history (the latest cell with that text: two
    cells with the same text are compiled under the same file name)."""
    get_ipython = getattr(builtins, "get_ipython", None)
    if get_ipython is None:
        return None
    try:
        shell = get_ipython()
    except Exception:  # noqa: BLE001 - not a live shell
        return None
    if shell is None:
        return None
    found = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if isinstance(found, dict) and filename in found:
        return int(found[filename])
    match = _IPYTHON_INPUT.match(filename)
    if match:
        return int(match.group(1))
    entry = linecache.cache.get(filename)
    history = getattr(getattr(shell, "history_manager", None), "input_hist_parsed", None)
    if entry and len(entry) >= 3 and history:
        text = "".join(entry[2]).rstrip("\n")
        for n in range(len(history) - 1, 0, -1):
            if str(history[n]).rstrip("\n") == text:
                return n
    return None


#: what a run records of its user files' text (larger files are labelled, not copied)
MAX_SOURCE_FILE_LINES = 5000
MAX_SOURCE_LINES = 20000


def source_map(files: set[str]) -> SourceMap:
    """What to record about the user files a run's frames point at: a label for each file
    that is a notebook cell, and the text of its lines (every line of a file, so that any line
    the run names, a stack's or a compiled graph's, can be found again; non-blank lines, up to
    :data:`MAX_SOURCE_FILE_LINES` per file and :data:`MAX_SOURCE_LINES` in all)."""
    out = SourceMap()
    budget = MAX_SOURCE_LINES
    for file in sorted(files):
        cell = cell_number(file)
        if cell is not None:
            out.labels[file] = f"cell In[{cell}]"
        text = linecache.getlines(file)
        if not text or len(text) > min(MAX_SOURCE_FILE_LINES, budget):
            continue
        budget -= len(text)
        lines = {n: t.strip() for n, t in enumerate(text, 1) if t.strip()}
        if lines:
            out.lines[file] = lines
    return out
