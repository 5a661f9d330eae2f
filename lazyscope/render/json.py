"""The JSON report: one serialisation of the typed :class:`~lazyscope.analyze.report.Report`.

``to_jsonable(obj)`` turns the report's dataclasses into JSON values, field by field, as their
``metadata`` says: ``json: False`` (a field for the views only: skipped), ``flatten`` (its
fields sit beside the parent's: a finding's typed facts, the summary's totals), ``omit_none`` /
``omit_empty`` (absent rather than null or empty), ``name`` (the key, when it is not the field's
name). A model class with its own ``to_json`` (a frame, a change, the capabilities) is written
as it writes itself. :mod:`lazyscope.render.schema` derives the JSON Schema from the same
classes and metadata, so the two cannot disagree; ``schema_version`` is
:data:`~lazyscope.analyze.report.REPORT_SCHEMA`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import PurePath
from typing import Any

import numpy as np

from lazyscope.analyze.report import Report


def _omitted(f: dataclasses.Field[Any], value: Any) -> bool:
    meta = f.metadata
    if meta.get("json") is False:
        return True
    if meta.get("omit_none") and value is None:
        return True
    return bool(meta.get("omit_empty")) and not value


def to_jsonable(obj: Any) -> Any:
    """``obj`` as JSON values (see the module docstring)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    own = getattr(type(obj), "to_json", None)
    if own is not None:
        return own(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if _omitted(f, value):
                continue
            if f.metadata.get("flatten"):
                out.update(to_jsonable(value))
            else:
                out[f.metadata.get("name", f.name)] = to_jsonable(value)
        return out
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    return str(obj)


def report_dict(report: Report) -> dict[str, Any]:
    """The report as a JSON-able dict."""
    out: dict[str, Any] = to_jsonable(report)
    return out


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=True, default=str)
