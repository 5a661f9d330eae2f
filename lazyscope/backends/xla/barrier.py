"""Which ``torch_xla.sync`` calls are the program's step barriers, decided once per call site."""

from __future__ import annotations

import sys
from typing import Any

from lazyscope.backends.xla.causes import barrier_source, is_program_barrier
from lazyscope.model import Frame
from lazyscope.model.ownership import is_library_file

#: call sites of torch_xla.sync seen so far -> (ends a step of the program, barrier_source)
_BARRIER_SITES: dict[tuple[Any, ...], tuple[bool, str]] = {}


def barrier_site(skip: int, limit: int = 24) -> tuple[bool, str]:
    """:func:`is_program_barrier` and :func:`barrier_source` of the caller's ``sync``, decided
    once per call site: the key is the (code, line) of each frame up to the first user frame,
    all the decision depends on. This runs at every sync of the program."""
    try:
        f: Any = sys._getframe(skip + 1)
    except ValueError:
        return True, "own"
    key: list[Any] = []
    while f is not None and len(key) < 2 * limit:
        code = f.f_code
        key += (code, f.f_lineno)
        if not is_library_file(code.co_filename):
            break
        f = f.f_back
    site = tuple(key)
    found = _BARRIER_SITES.get(site)
    if found is None:
        frames = [Frame(c.co_filename, line, c.co_name, is_library_file(c.co_filename))
                  for c, line in zip(site[::2], site[1::2], strict=True)]
        found = (is_program_barrier(frames), barrier_source(frames))
        if len(_BARRIER_SITES) > 4096:  # a program that syncs from ever new code
            _BARRIER_SITES.clear()
        _BARRIER_SITES[site] = found
    return found
