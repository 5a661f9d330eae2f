"""What a program may hand to the trace API: host values, checked when they are handed over.

``lazyscope.annotate_step(**values)``, ``lazyscope.set_info(**values)`` and
``lazyscope.note(text)`` record plain data: numbers, strings, booleans, None, and lists, tuples
and dicts of them (numpy scalars and small arrays are taken as their Python values, a path as
its text). Everything is converted here, at the call, never later:

* a ``torch.Tensor`` is refused with a :class:`~lazyscope.core.errors.UsageError` and never read:
  turning a device tensor into text would transfer it to the host, a sync the program never
  made, which lazyscope would then report as the program's own (pass ``loss.item()`` where
  the program reads the value anyway);
* any other object is refused too, rather than recorded as whatever its ``str()`` says (which
  may read a device, raise, or be megabytes long);
* the name ``step`` is reserved (the record's own step index);
* a value is at most :data:`MAX_VALUE_BYTES` of JSON.

Pure standard library; numpy and torch are recognised by name, never imported here.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from lazyscope.core.errors import UsageError

#: the largest value (as JSON) an annotation or an info entry may hold
MAX_VALUE_BYTES = 64 << 10
MAX_DEPTH = 8
#: names a program may not use (the annotation record's own keys)
RESERVED = frozenset({"step"})


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None) if torch is not None else None
    return tensor is not None and isinstance(value, tensor)


def _convert(api: str, name: str, value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if _is_tensor(value):
        where = getattr(getattr(value, "device", None), "type", "")
        on = f" on {where}" if where and where != "cpu" else ""
        raise UsageError(
            f"{api}({name}=...): a torch tensor{on} is not a host value; lazyscope never reads a "
            f"tensor (reading it would add a device-to-host transfer the program does not make): "
            f"pass a number, e.g. {name}=t.item() where the program reads it anyway")
    if depth >= MAX_DEPTH:
        raise UsageError(f"{api}({name}=...): the value is nested more than {MAX_DEPTH} deep")
    module = type(value).__module__
    if module == "numpy":
        if hasattr(value, "tolist") and getattr(value, "size", 1) <= 4096:
            return _convert(api, name, value.tolist(), depth + 1)
        raise UsageError(f"{api}({name}=...): a numpy array of {value.size} values is too large "
                         "to record")
    if isinstance(value, (list, tuple)):
        return [_convert(api, name, v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _convert(api, f"{name}[{k!r}]", v, depth + 1) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fsdecode(value)
    raise UsageError(
        f"{api}({name}=...): {type(value).__name__!r} is not a plain value; pass a number, a "
        "string, a boolean, None, or a list or dict of them")


def host_value(api: str, name: str, value: Any) -> Any:
    """``value`` as plain JSON data, or a UsageError saying why it cannot be recorded."""
    if name in RESERVED:
        raise UsageError(f"{api}({name}=...): {name!r} is reserved (the step's own index); "
                         "use another name")
    plain = _convert(api, name, value, 0)
    size = len(json.dumps(plain, ensure_ascii=False, default=str))
    if size > MAX_VALUE_BYTES:
        raise UsageError(f"{api}({name}=...): the value is {size} bytes as JSON; at most "
                         f"{MAX_VALUE_BYTES} are recorded")
    return plain


def host_values(api: str, values: dict[str, Any]) -> dict[str, Any]:
    """Every value of ``values`` through :func:`host_value`."""
    return {name: host_value(api, name, v) for name, v in values.items()}


def note_text(text: Any) -> str:
    """The text of ``lazyscope.note``: a string (a tensor refused as in :func:`host_value`)."""
    if _is_tensor(text):
        host_value("lazyscope.note", "text", text)
    if not isinstance(text, str):
        raise UsageError(f"lazyscope.note(text): a {type(text).__name__} is not a string")
    if len(text) > MAX_VALUE_BYTES:
        return text[:MAX_VALUE_BYTES] + f"... ({len(text)} characters)"
    return text
