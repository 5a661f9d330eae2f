"""The renderers: a Report -> text. All share one signature and sit in one registry.

``RENDERERS[name](report) -> str``. Files (plots, report.html, TensorBoard scalars) are written
by :mod:`lazyscope.render.views` alone; :mod:`lazyscope.render.plots` is the only module that
imports matplotlib. Importing this package registers how a
:class:`~lazyscope.analyze.report.Report` shows itself in a notebook (``Report.notebook_views``:
the HTML fragment of :func:`~lazyscope.render.views.notebook_html`, and the text report).
"""

from __future__ import annotations

from collections.abc import Callable

from lazyscope.analyze.report import Report
from lazyscope.render.html import render_html
from lazyscope.render.json import render_json
from lazyscope.render.text import render_text

Renderer = Callable[[Report], str]

RENDERERS: dict[str, Renderer] = {
    "text": render_text,
    "json": render_json,
    "html": render_html,  # the page without plots; `lazyscope report` writes the full one
}


def _notebook_html(report: Report) -> str:
    from lazyscope.render.views import notebook_html  # the plots: only in a notebook

    return notebook_html(report)


# a Report shows itself in a notebook through these (analyze does not import render)
Report.notebook_views.update(html=_notebook_html, text=render_text)

__all__ = ["RENDERERS", "Renderer", "render_html", "render_json", "render_text"]
