"""lazyscope's one way between its dataclasses and JSON: :func:`encode` writes any of them (the
report, the advice, a comparison, a diff, a check's result, ``meta.json``), :func:`decode`
reads one back, checked, and :mod:`lazyscope.render.schema` derives the JSON Schema from the
same classes and the same field metadata, so the three cannot disagree.

Field metadata (``dataclasses.field(metadata=...)``):

* ``json: False``: not written (a field for the views, or the analysis, only);
* ``name``: the key, when it is not the field's name;
* ``omit_none`` / ``omit_empty``: absent rather than null or empty (not required);
* ``flatten``: the field's own keys sit beside its parent's (a finding's typed facts);
* ``round``: a float written to that many decimals.

A class may add computed keys: ``JSON_EXTRA: ClassVar[dict[str, str]]`` maps a key to one of
its properties (the advice's ``recommended`` plan); they are written, never read back.

Decoding ignores unknown keys (a newer writer adds fields), takes a missing key's default, and
raises ValueError naming the field for a value of the wrong type (a corrupt or hostile file).
The checks are built once per class from its type hints. A class that changed its layout
upgrades old objects first (a ``json_upgrade`` classmethod: old key names, old defaults).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import fields
from pathlib import PurePath
from typing import Any, TypeVar

import numpy as np

from lazyscope.model.frames import Frame

_T = TypeVar("_T")


def from_dict(cls: type[_T], data: Any) -> _T:
    """A dataclass from a JSON object, ignoring unknown keys (newer writers add fields)."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} payload is not an object")
    names = _field_names(typing.cast(type, cls))
    return cls(**{k: v for k, v in data.items() if k in names})


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _checker(hint: Any) -> Callable[[Any], bool]:
    """A function telling whether a decoded JSON value has the shape of a type hint (str, int,
    float, bool, None, lists and dicts of them, unions, dataclasses); built once per hint.
    Run for every payload of a run: the types ``json.loads`` gives are one ``type(v) in``
    test, anything else (a subclass, a union's other member) takes the full check."""
    if hint is Any:
        return lambda v: True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        exact = frozenset(t for a in args for t in _EXACT.get(a, ()))
        options = [_checker(a) for a in args]
        return lambda v: type(v) in exact or any(c(v) for c in options)
    if hint is type(None):
        return lambda v: v is None
    if origin is list or hint is list:
        item = _checker(args[0]) if args else None
        return lambda v: isinstance(v, list) and (item is None or all(item(x) for x in v))
    if origin is dict or hint is dict:
        if not args:
            return lambda v: isinstance(v, dict)
        kc, vc = _checker(args[0]), _checker(args[1])
        return lambda v: isinstance(v, dict) and all(kc(k) and vc(x) for k, x in v.items())
    exact = frozenset(_EXACT.get(hint, ()))
    if hint is float:
        return lambda v: type(v) in exact or (isinstance(v, (int, float))
                                              and not isinstance(v, bool))
    if hint is int:
        return lambda v: type(v) in exact or (isinstance(v, int) and not isinstance(v, bool))
    return lambda v: type(v) in exact or isinstance(v, hint)


#: the types ``json.loads`` gives that match a plain hint outright
_EXACT: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float),
                                       bool: (bool,), type(None): (type(None),)}


@functools.cache
def _checkers(cls: type) -> list[tuple[str, Callable[[Any], bool]]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, _checker(hints[f.name])) for f in fields(cls)]


def validate(obj: _T) -> _T:
    """``obj`` if every field of the dataclass holds a value of its declared type; ValueError
    naming the field otherwise (a corrupt or hostile run file)."""
    for name, check in _checkers(typing.cast(type, type(obj))):
        if not check(getattr(obj, name)):
            raise ValueError(f"{type(obj).__name__}.{name} has the wrong type")
    return obj



def frame_from_json(value: Any) -> Frame | None:
    """A frame from ``{"file", "line", "function"}``; None for anything else."""
    if isinstance(value, dict) and "file" in value:
        return Frame(str(value["file"]), int(value.get("line") or 0), str(value.get("function", "")))
    return None


def lenient(cls: type[_T], data: dict[str, Any]) -> _T:
    """A dataclass from a JSON object, each field's value taken when it has the declared type
    and left at its default otherwise (data a program wrote, read as far as it is right)."""
    ok = {name: data[name] for name, check in _checkers(typing.cast(type, cls))
          if name in data and check(data[name])}
    return cls(**ok)


# ---- encoding ------------------------------------------------------------------------------


def _omitted(f: dataclasses.Field[Any], value: Any) -> bool:
    meta = f.metadata
    if meta.get("json") is False:
        return True
    if meta.get("omit_none") and value is None:
        return True
    return bool(meta.get("omit_empty")) and not value


def json_extra(cls: type) -> dict[str, str]:
    """The computed keys a class adds (``JSON_EXTRA``: key -> property name)."""
    extra: dict[str, str] = getattr(cls, "JSON_EXTRA", {})
    return extra


def encode(obj: Any) -> Any:
    """``obj`` as JSON values (see the module docstring)."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    own = getattr(type(obj), "to_json", None)
    if own is not None:  # an event payload: the run's own record format (model.payloads)
        return own(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if _omitted(f, value):
                continue
            if f.metadata.get("flatten"):
                out.update(encode(value))
                continue
            digits = f.metadata.get("round")
            if digits is not None and isinstance(value, float):
                value = round(value, digits)
            out[f.metadata.get("name", f.name)] = encode(value)
        for key, attr in json_extra(type(obj)).items():
            out[key] = encode(getattr(obj, attr))
        return out
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    return str(obj)


# ---- decoding ------------------------------------------------------------------------------


def decode(cls: type[_T], data: Any) -> _T:
    """An instance of the dataclass ``cls`` from JSON (see the module docstring)."""
    value: _T = _decoder(typing.cast(Any, cls))(data, "")
    return value


def _kind(hint: Any) -> str:
    """What a value of ``hint`` is, for an error: ``a string``, ``an integer`` ..."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a) for a in args if a is not type(None))
    if origin in (list, tuple) or hint in (list, tuple):
        return "a list"
    if origin is dict or hint is dict or dataclasses.is_dataclass(hint):
        return "an object"
    return {str: "a string", int: "an integer", float: "a number",
            bool: "true or false"}.get(hint, f"a {getattr(hint, '__name__', hint)}")


def _wrong(where: str, hint: Any) -> ValueError:
    return ValueError(f"'{where or 'the value'}' is not {_kind(hint)}")


def _at(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


@functools.cache
def _decoder(hint: Any) -> Callable[[Any, str], Any]:
    """A function decoding a JSON value of type ``hint`` (``where``: its path, for errors)."""
    if hint is Any:
        return lambda v, where: v
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [(a, _decoder(a), _checker(a)) for a in args]

        def union(v: Any, where: str) -> Any:
            for a, dec, check in members:
                if check(v) or (dataclasses.is_dataclass(a) and isinstance(v, dict)):
                    return dec(v, where)
            raise _wrong(where, hint)
        return union
    if origin in (list, tuple) or hint in (list, tuple):
        item = _decoder(args[0]) if args else (lambda v, where: v)
        make = tuple if (origin is tuple or hint is tuple) else list

        def sequence(v: Any, where: str) -> Any:
            if not isinstance(v, list):
                raise _wrong(where, hint)
            return make(item(x, f"{where}[{i}]") for i, x in enumerate(v))
        return sequence
    if origin is dict or hint is dict:
        value = _decoder(args[1]) if args else (lambda v, where: v)

        def mapping(v: Any, where: str) -> Any:
            if not isinstance(v, dict):
                raise _wrong(where, hint)
            return {str(k): value(x, _at(where, k)) for k, x in v.items()}
        return mapping
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _object_decoder(hint)
    check = _checker(hint)

    def scalar(v: Any, where: str) -> Any:
        if not check(v):
            raise _wrong(where, hint)
        return float(v) if hint is float else v
    return scalar


def _object_decoder(cls: type) -> Callable[[Any, str], Any]:
    hints = typing.get_type_hints(cls)
    read = [(f.name, f.metadata.get("name", f.name), _decoder(hints[f.name]))
            for f in fields(cls) if f.metadata.get("json") is not False
            and not f.metadata.get("flatten") and f.init]
    upgrade = getattr(cls, "json_upgrade", None)

    def obj(v: Any, where: str) -> Any:
        if not isinstance(v, dict):
            raise _wrong(where, cls)
        if upgrade is not None:
            v = upgrade(dict(v))
        return cls(**{name: dec(v[key], _at(where, key)) for name, key, dec in read
                      if key in v})
    return obj
