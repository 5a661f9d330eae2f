"""Backends: the only package that imports torch_xla or torch internals.

Each backend is a package of its own: ``xla`` (torch_xla), ``pytorch`` (plain PyTorch: the
``eager`` and ``compile`` backends), ``torchax`` (PyTorch on JAX arrays, compiled by
``jax.jit``). A backend package holds its collector and runtime (which
import their framework lazily, in methods) and a ``wording`` module: the sentences its reports
use and the capabilities it declares, plain data that imports nothing (the analysis reads it
on machines without the framework).

This module is the registry only, and imports no backend: ``get_collector(name, options)``
returns what collects a trace on that backend and ``get_runtime(name, ...)`` what a scenario
runs on (see :mod:`lazyscope.backends.base`); each is imported when asked for, so lazyscope runs
on a machine without torch_xla (a GPU box) with the backends that machine has.
"""

from __future__ import annotations

import importlib
from typing import Any

from lazyscope.core.errors import UsageError

#: name -> ("module:Collector class", "module:Runtime class")
BACKENDS: dict[str, tuple[str, str]] = {
    "xla": ("lazyscope.backends.xla.collector:XlaCollector",
            "lazyscope.backends.xla.runtime:XlaRuntime"),
    "eager": ("lazyscope.backends.pytorch.collector:EagerCollector",
              "lazyscope.backends.pytorch.collector:EagerRuntime"),
    "compile": ("lazyscope.backends.pytorch.collector:CompileCollector",
                "lazyscope.backends.pytorch.collector:CompileRuntime"),
    "torchax": ("lazyscope.backends.torchax.collector:TorchaxCollector",
                "lazyscope.backends.torchax.collector:TorchaxRuntime"),
}

__all__ = ["BACKENDS", "get_collector", "get_runtime"]


def _load(name: str, which: int) -> Any:
    try:
        spec = BACKENDS[name][which]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        ) from None
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def get_collector(name: str, options: Any, **collaborators: Any) -> Any:
    """A new collector of backend ``name`` (a :class:`~lazyscope.backends.base.Collector`),
    given its collaborators (``worker_tracer=``); UsageError naming the choices for an unknown
    one."""
    return _load(name, 0)(options, **collaborators)


def get_runtime(name: str, **options: Any) -> Any:
    """A runtime of backend ``name`` (a :class:`~lazyscope.backends.base.Runtime`; ``device=``,
    ``dynamic=`` for the eager/compile ones)."""
    return _load(name, 1)(**options)
