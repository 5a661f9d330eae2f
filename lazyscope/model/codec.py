"""Decoding JSON into the model's dataclasses, checked: unknown keys are ignored (a newer
writer adds fields), a value of the wrong type is a ValueError naming the field (a corrupt or
hostile run file). Built once per dataclass from its type hints."""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

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
