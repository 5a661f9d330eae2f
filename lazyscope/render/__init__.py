"""Renderers: a Report -> text (:mod:`lazyscope.render.renderers`: ``RENDERERS[name](report)
-> str``), and the files a run shows itself with (:mod:`lazyscope.render.views`: the plots,
report.html, TensorBoard scalars; :mod:`lazyscope.render.plots` is the only module that imports
matplotlib).

Importing this package imports nothing more: ``RENDERERS`` and ``render_*`` are loaded from
:mod:`~lazyscope.render.renderers` when first used, so a plotter process
(:mod:`lazyscope.render.plotter`) that imports :mod:`~lazyscope.render.plots` does not import
the analysis. Loading the renderers registers how a Report shows itself in a notebook.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RENDERERS", "Renderer", "render_html", "render_json", "render_text"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lazyscope.render import renderers

        return getattr(renderers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
