"""Backends: the only package that imports torch_xla or torch internals.

``get_collector(name, options)`` returns what collects a trace on that backend and
``get_runtime(name, ...)`` what a scenario runs on (see :mod:`lazyscope.backends.base`). Backend
modules are imported lazily so that lazyscope runs on a machine without torch_xla (a GPU box)
with the backends that machine has.
"""

from __future__ import annotations

import importlib
from typing import Any

from lazyscope.backends.base import (
    Collector,
    Recorder,
    Runtime,
    StepLimitReached,
    TraceOptions,
    active,
)
from lazyscope.errors import UsageError

#: name -> ("module", "Collector class", "Runtime class")
BACKENDS: dict[str, tuple[str, str, str]] = {
    "xla": ("lazyscope.backends.xla", "XlaCollector", "XlaRuntime"),
    "eager": ("lazyscope.backends.torch_backend", "EagerCollector", "EagerRuntime"),
    "compile": ("lazyscope.backends.torch_backend", "CompileCollector", "CompileRuntime"),
}

__all__ = [
    "BACKENDS",
    "Collector",
    "Recorder",
    "Runtime",
    "StepLimitReached",
    "TraceOptions",
    "active",
    "get_collector",
    "get_runtime",
]


def _spec(name: str) -> tuple[str, str, str]:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        ) from None


def get_collector(name: str, options: TraceOptions) -> Collector:
    """A new collector of backend ``name``; UsageError naming the choices for an unknown one."""
    module, cls, _ = _spec(name)
    return getattr(importlib.import_module(module), cls)(options)


def get_runtime(name: str, **options: Any) -> Runtime:
    """A runtime of backend ``name`` (``device=``, ``dynamic=`` for the eager/compile ones)."""
    module, _, cls = _spec(name)
    return getattr(importlib.import_module(module), cls)(**options)
