"""The JSON Schema of the JSON report, generated from the report's dataclasses.

``report_schema()`` walks :class:`~lazyscope.analyze.report.Report`'s type hints with the same
field metadata :func:`lazyscope.model.codec.encode` writes by (``json: False`` skipped,
``flatten`` merged into the parent, ``omit_none`` / ``omit_empty`` not required, ``name`` the
key, a class's ``JSON_EXTRA`` keys typed by their properties), so the schema describes what the
encoder writes. A finding's facts are one of several dataclasses:
flattened, they become an ``anyOf`` of each kind's required keys. The two model classes
that keep their own record format (``to_json``: a frame, a change) have their schema here.
:func:`schema_of` gives the schema of any other output (the advice, a comparison, a diff, a
check's result).

The schema ships as ``lazyscope/render/report.schema.json`` (``python -m
lazyscope.render.schema`` writes it); ``tests/unit/test_schema.py`` checks the shipped file is
what this module generates and validates real reports against it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from lazyscope.analyze.report import REPORT_SCHEMA, Report
from lazyscope.model import Change, Frame
from lazyscope.model.codec import json_extra

SCHEMA_FILE = Path(__file__).with_name("report.schema.json")

_FRAME = {"type": "object", "required": ["file", "line", "function"],
          "properties": {"file": {"type": "string"}, "line": {"type": "integer"},
                         "function": {"type": "string"}}}
#: classes that serialise themselves (their ``to_json``), described by hand
_OWN: dict[type, dict[str, Any]] = {
    Frame: _FRAME,
    Change: {"type": "object", "required": ["input", "what", "index", "before", "after"],
             "properties": {"input": {"type": "string"}, "what": {"type": "string"},
                            "index": {"type": ["integer", "null"]}, "before": {},
                            "after": {}, "text": {"type": "string"}, "origin": _FRAME}},
}
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean",
            type(None): "null"}


def _type(hint: Any) -> dict[str, Any]:
    if hint is Any:
        return {}
    if hint in _OWN:
        return _OWN[hint]
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [_type(a) for a in args]
        simple = [m["type"] for m in members if set(m) == {"type"} and isinstance(m["type"], str)]
        if len(simple) == len(members):
            return {"type": simple}
        return {"anyOf": members}
    if origin in (list, tuple) or hint in (list, tuple):
        return {"type": "array", "items": _type(args[0]) if args else {}}
    if origin is dict or hint is dict:
        return {"type": "object", "additionalProperties": _type(args[1]) if args else {}}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _object(hint)
    raise TypeError(f"no JSON schema for {hint!r}")


def _object(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: list[dict[str, Any]] = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if meta.get("json") is False:
            continue
        hint = hints[f.name]
        if meta.get("flatten"):
            members = typing.get_args(hint) or (hint,)
            parts = [_object(m) for m in members]
            if len(parts) == 1:
                properties.update(parts[0]["properties"])
                required += parts[0]["required"]
            else:
                extra.append({"anyOf": [{"required": p["required"]} for p in parts]})
                for p in parts:
                    for key, value in p["properties"].items():
                        properties.setdefault(key, value)
            continue
        name = meta.get("name", f.name)
        properties[name] = _type(hint)
        if not (meta.get("omit_none") or meta.get("omit_empty")):
            required.append(name)
    for key, attr in json_extra(cls).items():  # computed keys: their property's return type
        properties[key] = _type(typing.get_type_hints(getattr(cls, attr).fget)["return"])
        required.append(key)
    out: dict[str, Any] = {"type": "object", "properties": properties,
                           "required": sorted(set(required))}
    if extra:
        out["allOf"] = extra
    return out


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``lazyscope report --format json``."""
    schema = _object(Report)
    schema["properties"]["schema_version"] = {"const": REPORT_SCHEMA}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:lazyscope:report:{REPORT_SCHEMA}",
            "title": "lazyscope report (lazyscope report RUN --format json)", **schema}


def schema_of(cls: type, title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a dataclass as :func:`~lazyscope.model.codec.encode`
    writes it."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
            **_object(cls)}


def schema_text() -> str:
    return json.dumps(report_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m lazyscope.render.schema > lazyscope/render/report.schema.json
    sys.stdout.write(schema_text())
