"""Places in Python source: a :class:`Frame`, a stack of them (innermost first), and the
user's frames of a stack. Which file is the user's is decided when a frame is made
(:mod:`lazyscope.frames`); here a frame only carries the answer (``library``)."""

from __future__ import annotations

from dataclasses import dataclass
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
