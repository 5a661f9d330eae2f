"""Renderers: a Run -> text. All share one signature and sit in one registry.

``RENDERERS[name](run) -> str``. Files (plots) are written by :mod:`lazyscope.render.plots`,
the only module that imports matplotlib.
"""

from __future__ import annotations

from collections.abc import Callable

from lazyscope.model import Run
from lazyscope.render.html import render_html
from lazyscope.render.json import render_json
from lazyscope.render.text import render_text

Renderer = Callable[[Run], str]

RENDERERS: dict[str, Renderer] = {
    "text": render_text,
    "json": render_json,
    "html": render_html,  # the self-contained page; `lazyscope report --format html` writes it
}

__all__ = ["RENDERERS", "Renderer", "render_html", "render_json", "render_text"]
