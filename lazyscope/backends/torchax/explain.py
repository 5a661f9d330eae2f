"""JAX's cache-miss explanation, read and said in the user's names.

With ``jax_explain_cache_misses`` on, JAX logs (logger ``jax._src.interpreters.partial_eval``,
WARNING) one message for each tracing cache miss of a jitted function, in one of these forms
(jax 0.10, captured in ``tests/unit/test_torchax_explain.py``)::

    TRACING CACHE MISS at FILE:LINE:COL (CALLER):
      never seen function:
        NAME id=ID defined at FILE:LINE
      but seen another function defined on the same line; maybe ...      (optional)

    TRACING CACHE MISS at ...:
      for NAME defined at FILE:LINE
      all previously seen cache keys differ. For the closest previous key:
      different input types:
      * at args[1]['x'], now f32[16,4] and before f32[8,4]
      * at b, now f32[]{weak_type=False} and before f32[]{weak_type=True}https://...

    ... different input pytree:
      * at input path [0][2], now <class '...Static'> with pytree metadata Static(val=3.0)
        and before ... Static(val=2.0), so the pytree node metadata does not match
    ... Tracing context doesn't match, e.g. due to config or context manager.
    ... Debug info doesn't match.

This is the only place that text is parsed (:func:`parse_miss`): the rest of the backend reads
the :class:`Miss` it returns. A jitted torchax function is ``jax.jit(partial(call_torch, f))``,
whose arguments JAX names ``args[i]``; :func:`user_path` says them with the names of ``f``'s
own parameters (``args[1]['x']`` -> ``batch['x']``; a pytree path ``[0][2]`` -> ``scale``).
Pure functions: no jax import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: the kinds of miss (what changed since the closest earlier call)
NEW_FUNCTION = "new_function"  # JAX never saw this function object
TYPES = "types"  # an argument's shape, dtype or weak type
TREE = "tree"  # the arguments' structure, or a static argument's value
CONTEXT = "context"  # the tracing context (a config or context manager)
DEBUG = "debug"  # the function's debug info
UNKNOWN = "unknown"

_HEAD = re.compile(r"TRACING CACHE MISS at (?P<at>.*?):\s*$")
_NEVER = re.compile(r"^\s*(?P<name>\S.*?) id=\d+(?: defined at (?P<where>\S+))?\s*$")
_FOR = re.compile(r"^\s*for (?P<name>\S.*?)(?: defined at (?P<where>\S+))?\s*$")
_TYPE = re.compile(r"^\s*\* at (?P<path>.+?), now (?P<now>\S+) and before (?P<before>\S+?)"
                   r"(?:https?://\S*)?\s*$")
_TREE = re.compile(r"^\s*\* at input path (?P<path>\S*), now (?P<now>.+?) and before "
                   r"(?P<before>.+?), so (?P<why>.*)$")
_STATIC = re.compile(r"Static\(val=(?P<val>.*)\)\s*$")
_CONTEXT = re.compile(r"^\s*\* (?P<name>\S+) differs: now (?P<now>.*) and before (?P<before>.*)$")
_SHAPED = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[^\]]*)\](?:\{weak_type=(?P<weak>\w+)\})?")


@dataclass
class MissItem:
    """One difference JAX names: where (``path``, JAX's words: ``args[1]['x']`` or a pytree
    path ``[0][2]``), what it is now and was before, and JAX's reason (pytree changes)."""

    path: str
    now: str
    before: str
    why: str = ""


@dataclass
class Miss:
    """One tracing cache miss (see the module docstring)."""

    kind: str
    function: str = ""
    defined_at: str = ""
    #: JAX saw another function defined on the same line (a function re-made in a loop)
    same_line: bool = False
    items: list[MissItem] = field(default_factory=list)
    text: str = ""


def parse_miss(text: str) -> Miss | None:
    """The miss JAX's message ``text`` explains; None when it is not a tracing cache miss."""
    lines = text.splitlines()
    if not lines or not _HEAD.match(lines[0].strip()):
        return None
    miss = Miss(UNKNOWN, text=text)
    body = lines[1:]
    for i, line in enumerate(body):
        stripped = line.strip()
        if stripped == "never seen function:" and i + 1 < len(body):
            miss.kind = NEW_FUNCTION
            m = _NEVER.match(body[i + 1])
            if m:
                miss.function, miss.defined_at = m["name"], m["where"] or ""
            miss.same_line = any("seen another function defined on the same line" in x
                                 for x in body)
            return miss
        m = _FOR.match(line)
        if m and not miss.function and not stripped.startswith("*"):
            miss.function, miss.defined_at = m["name"], m["where"] or ""
        if stripped.startswith("different input types"):
            miss.kind = TYPES
        elif stripped.startswith("different input pytree"):
            miss.kind = TREE
        elif stripped.startswith("Tracing context doesn't match"):
            miss.kind = CONTEXT
        elif stripped.startswith("Debug info doesn't match"):
            miss.kind = DEBUG
        if miss.kind == TYPES and (t := _TYPE.match(line)):
            miss.items.append(MissItem(t["path"], t["now"], t["before"]))
        elif miss.kind == TREE and (t := _TREE.match(line)):
            miss.items.append(MissItem(t["path"], t["now"], t["before"], t["why"].strip()))
        elif miss.kind == CONTEXT and (t := _CONTEXT.match(line)):
            miss.items.append(MissItem(t["name"], t["now"], t["before"]))
    return miss


# --------------------------------------------------------------------------- names


_ARGS = re.compile(r"^args\[(?P<i>\d+)\](?P<rest>.*)$")
_KWARGS = re.compile(r"^kwargs\[(?P<k>'[^']*'|\"[^\"]*\")\](?P<rest>.*)$")
_TREE_PATH = re.compile(r"^\[(?P<top>[01])\]\[(?P<i>\d+|'[^']*')\](?P<rest>.*)$")


def param_name(names: Sequence[str], index: int, varargs: str = "") -> str:
    """The user's name of positional argument ``index``: its parameter, else ``varargs[k]``,
    else ``args[index]`` (JAX's own)."""
    if index < len(names):
        return names[index]
    if varargs:
        return f"{varargs}[{index - len(names)}]"
    return f"args[{index}]"


def user_path(path: str, names: Sequence[str], varargs: str = "") -> str:
    """JAX's name of an argument (``args[3]['input_ids']``, ``kwargs['mask']``, a pytree path
    ``[0][3]`` or ``[1]['mask']``) in the user's: the parameter ``names`` of the function the
    user jitted (positional, in order) and its ``*varargs`` name. A path JAX already says in
    the user's names (a plain ``jax.jit(f)``: ``x``, ``batch['x']``) is kept."""
    m = _ARGS.match(path)
    if m:
        return param_name(names, int(m["i"]), varargs) + m["rest"]
    m = _KWARGS.match(path)
    if m:
        return m["k"][1:-1] + m["rest"]
    m = _TREE_PATH.match(path)
    if m:
        if m["top"] == "1":  # keyword arguments
            key = m["i"]
            return (key[1:-1] if key.startswith("'") else key) + m["rest"]
        return param_name(names, int(m["i"]), varargs) + m["rest"]
    return path


def static_value(text: str) -> str | None:
    """The value of a static argument in JAX's pytree words (``... Static(val=3.0)``)."""
    m = _STATIC.search(text)
    return m["val"] if m else None


def shaped(text: str) -> tuple[str, list[int], bool | None] | None:
    """``f32[16,4]{weak_type=True}`` -> ``("f32", [16, 4], True)``; None for other text."""
    m = _SHAPED.match(text)
    if not m:
        return None
    dims = [int(d) for d in m["dims"].split(",") if d.strip().lstrip("-").isdigit()]
    weak = None if m["weak"] is None else m["weak"] == "True"
    return m["dtype"], dims, weak
