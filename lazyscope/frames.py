"""Which frames are the user's, and the bounded stacks that events keep.

A frame is *library* code when it is in torch, torch_xla, any third-party package
(``site-packages`` / ``dist-packages``), the standard library, or lazyscope itself, except
``lazyscope/scenarios/`` (the built-in scenarios are user programs like any other). The user's
line of an event is its innermost non-library frame, so a third-party frame (a Hugging Face
model's forward, say) is never reported as the line to change: the user's call into it is.

:func:`capture_stack` walks the Python stack without building a traceback and keeps what events
store: the few library frames just inside the innermost user frame (which torch or torch_xla
call was running) and the user frames outward, bounded (``benchmarks/scale.py``: full stacks made
events 25x larger). Pure standard library.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from lazyscope.model import Frame, Stack

_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep
_SCENARIOS_DIR = _PACKAGE_DIR + "scenarios" + os.sep
_STDLIB_DIRS = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")}
    if p
)
_LIBRARY_PARTS = (
    f"{os.sep}site-packages{os.sep}",
    f"{os.sep}dist-packages{os.sep}",
    # source checkouts of the frameworks (an editable install is not under site-packages)
    f"{os.sep}torch_xla{os.sep}",
    f"{os.sep}torch{os.sep}",
    f"{os.sep}torchdynamo{os.sep}",
    f"{os.sep}typing_extensions.py",
)
#: library frames kept just inside the innermost user frame
LEADING_LIBRARY_FRAMES = 6
#: user frames kept per event
MAX_USER_FRAMES = 24


@functools.lru_cache(maxsize=8192)
def is_library_file(file: str) -> bool:
    """True for frames of torch, torch_xla, third-party packages, the standard library and
    lazyscope itself (its scenarios excepted). Cached per file name: it resolves the path, and
    runs for every frame walked at each value read and fallback call during a trace."""
    if not file or file.startswith("<"):
        return True
    try:
        resolved = str(Path(file).resolve())
    except OSError:
        resolved = file
    if resolved.startswith(_PACKAGE_DIR):
        return not resolved.startswith(_SCENARIOS_DIR)
    if any(part in resolved for part in _LIBRARY_PARTS):
        return True
    return any(resolved.startswith(d) for d in _STDLIB_DIRS)


def is_lazyscope_file(file: str) -> bool:
    """True for lazyscope's own code (not its scenarios): frames a report never shows."""
    try:
        resolved = str(Path(file).resolve())
    except OSError:
        resolved = file
    return resolved.startswith(_PACKAGE_DIR) and not resolved.startswith(_SCENARIOS_DIR)


def make_frame(file: str, line: int, function: str = "") -> Frame:
    """A frame, classified."""
    return Frame(file, int(line or 0), function, is_library_file(file))


def bound_stack(frames: list[Frame]) -> Stack:
    """What an event keeps of a stack (innermost first): up to LEADING_LIBRARY_FRAMES library
    frames before the first user frame, then the user frames (at most MAX_USER_FRAMES). A stack
    without user frames keeps its innermost LEADING_LIBRARY_FRAMES frames."""
    first_user = next((i for i, f in enumerate(frames) if not f.library), None)
    if first_user is None:
        return tuple(frames[:LEADING_LIBRARY_FRAMES])
    lead = frames[max(0, first_user - LEADING_LIBRARY_FRAMES):first_user]
    users: list[Frame] = []
    for f in frames[first_user:]:
        # the watch window's trampoline repeats its caller's frame (xla_watch.trampoline)
        if not f.library and (not users or users[-1] != f):
            users.append(f)
            if len(users) >= MAX_USER_FRAMES:
                break
    return tuple(lead + users)


def capture_stack(skip: int = 1) -> Stack:
    """The caller's stack (``skip`` frames above this call), bounded as :func:`bound_stack`.

    Walks frames directly (no traceback objects, no source lines read)."""
    try:
        f: Any = sys._getframe(skip + 1)
    except ValueError:  # a shallow stack (the autograd engine's thread)
        return ()
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
    return tuple(lead[-LEADING_LIBRARY_FRAMES:] + users) if users else \
        tuple(lead[:LEADING_LIBRARY_FRAMES])


def frames_from_summary(stack: Any) -> list[Frame]:
    """Classified frames, innermost first, from a traceback ``StackSummary`` (outermost first)."""
    return [make_frame(str(fr.filename), int(fr.lineno or 0), str(fr.name))
            for fr in reversed(list(stack or []))]
