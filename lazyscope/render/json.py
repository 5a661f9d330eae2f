"""The JSON report: the typed :class:`~lazyscope.analyze.report.Report` through lazyscope's one
encoder (:func:`lazyscope.model.codec.encode`: field by field, as the fields' metadata says);
:mod:`lazyscope.render.schema` derives the JSON Schema from the same classes and metadata, so
the two cannot disagree; ``schema_version`` is :data:`~lazyscope.analyze.report.REPORT_SCHEMA`.

Every JSON lazyscope prints or writes (the report, the advice, a comparison, a diff, a check)
goes through :func:`dumps`: keys sorted, two-space indent.
"""

from __future__ import annotations

import json
from typing import Any

from lazyscope.analyze.report import Report
from lazyscope.model.codec import encode

#: the report's dataclasses as JSON values (the HTML tables use it too)
to_jsonable = encode


def dumps(obj: Any) -> str:
    """``obj`` (a dataclass of lazyscope's) as the JSON text lazyscope writes, no newline."""
    return json.dumps(encode(obj), indent=2, sort_keys=True, default=str)


def report_dict(report: Report) -> dict[str, Any]:
    """The report as a JSON-able dict."""
    out: dict[str, Any] = encode(report)
    return out


def render_json(report: Report) -> str:
    return dumps(report)
