"""Backends: the only package that imports torch_xla or torch internals.

``get_backend(name)`` returns a fresh :class:`~lazyscope.backends.base.Backend`. Backend modules
are imported lazily so that lazyscope runs on a machine without torch_xla (a GPU box) with the
backends that machine has.
"""

from __future__ import annotations

import importlib

from lazyscope.backends.base import (
    Backend,
    Recorder,
    StepLimitReached,
    active_recorder,
    annotate_step,
    set_run_info,
)
from lazyscope.errors import UsageError

#: name -> "module:ClassName"
BACKENDS: dict[str, str] = {
    "xla": "lazyscope.backends.xla:XlaBackend",
    "eager": "lazyscope.backends.torch_backend:EagerBackend",
    "compile": "lazyscope.backends.torch_backend:CompileBackend",
}

__all__ = [
    "BACKENDS",
    "Backend",
    "Recorder",
    "StepLimitReached",
    "active_recorder",
    "annotate_step",
    "get_backend",
    "set_run_info",
]


def get_backend(name: str) -> Backend:
    """A new backend instance by name; UsageError naming the choices for an unknown one."""
    try:
        spec = BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        ) from None
    module_name, _, cls_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls()
