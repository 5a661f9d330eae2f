"""Places in Python source: a :class:`Frame`, a stack of them (innermost first), and the
user's frames of a stack. Which file is the user's is decided when a frame is made
(:mod:`lazyscope.model.ownership`); here a frame only carries the answer (``library``).

:class:`SourceMap` is what a run recorded, when it was made, about the files its user frames
point at: a label for a file that is no file to a reader (a notebook cell, ``cell In[3]``) and the
text of each line a frame points at (so that a diff of two runs can follow a line that moved).
It lives in ``meta.json`` (``info.sources``); a run made before it has none. :func:`location`
is how every renderer names a frame's place: ``cell In[3], line 12`` in a notebook (IPython's
own wording), else ``file:line``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Frame:
    """A place in Python source. ``library`` is True for frames that are not the user's code
    (torch, the XLA package, third-party packages, the standard library, lazyscope itself)."""

    file: str
    line: int
    function: str = ""
    library: bool = False

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} ({self.function})" if self.function else where

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}


#: a Python stack, innermost frame first
Stack = tuple[Frame, ...]


def user_frames(stack: Stack) -> list[Frame]:
    """The user's frames of a stack, innermost first."""
    return [f for f in stack if not f.library]


def user_site(stack: Stack) -> Frame | None:
    """The innermost user frame: the line an event is reported at."""
    for frame in stack:
        if not frame.library:
            return frame
    return None


#: the key of ``meta.json`` ``info`` that holds a run's :class:`SourceMap`
SOURCES_KEY = "sources"


@dataclass
class SourceMap:
    """What a run knows of the files its user frames point at (see the module docstring):
    ``labels`` maps a file name to what to call it (``cell In[3]``), ``lines`` a file name to the
    text of its lines that frames point at (``{line: text}``, stripped)."""

    labels: dict[str, str] = field(default_factory=dict)
    lines: dict[str, dict[int, str]] = field(default_factory=dict)

    def text(self, file: str, line: int) -> str | None:
        """The recorded text of ``file:line`` (None when the run did not record it)."""
        return self.lines.get(file, {}).get(line) or None

    def to_json(self) -> dict[str, Any]:
        return {"labels": dict(self.labels),
                "lines": {f: {str(n): t for n, t in ls.items()} for f, ls in self.lines.items()}}

    @classmethod
    def from_json(cls, data: Any) -> SourceMap:
        """Tolerant: anything that is not the recorded shape reads as nothing recorded."""
        if not isinstance(data, dict):
            return cls()
        labels = data.get("labels")
        lines = data.get("lines")
        out = cls()
        if isinstance(labels, dict):
            out.labels = {str(k): str(v) for k, v in labels.items() if isinstance(v, str)}
        if isinstance(lines, dict):
            for file, by_line in lines.items():
                if isinstance(by_line, dict):
                    out.lines[str(file)] = {int(n): str(t) for n, t in by_line.items()
                                            if str(n).isdigit() and isinstance(t, str)}
        return out


#: a cell's code as the ``%%lazyscope`` magic names it (no file: the name is the label)
_CELL_NAME = re.compile(r"^cell In\[\d+\]$")


def location(frame: Frame, sources: SourceMap | None = None) -> str:
    """Where ``frame`` is, as a reader names it: ``cell In[3], line 12`` (IPython's own
    wording) for a notebook cell, else ``file:line``."""
    label = sources.labels.get(frame.file) if sources is not None else None
    if label is None and _CELL_NAME.match(frame.file):
        label = frame.file
    return f"{label}, line {frame.line}" if label else f"{frame.file}:{frame.line}"
