"""Every compilation JAX makes, from its own instrumentation.

* ``jax.monitoring`` duration events (JAX's public listener API): ``jaxpr_trace_duration``
  (tracing), ``jaxpr_to_mlir_module_duration`` (lowering) and ``backend_compile_duration``
  (XLA's compile), each with the function's name. One ``backend_compile_duration`` event is one
  compilation: what ``jax_log_compiles`` logs, so the count is JAX's own. The tracing and
  lowering seconds the same thread measured since its last compilation belong to it.
* ``jax_explain_cache_misses``: JAX's explanation of each tracing cache miss, taken from its
  logger while the trace runs (not printed; the program's own setting and handlers are kept and
  restored), read by :mod:`lazyscope.backends.torchax.explain`.
* The compiled executable's memory (what ``jax.stages.Compiled.memory_analysis()`` returns:
  ``get_compiled_memory_stats()``), read as XLA hands it over: ``jax._src.compiler.
  compile_or_get_cached`` is wrapped (jax 0.10's name; where it is missing, memory is not
  measured and the capabilities say so).

Each compilation becomes a :class:`RawCompile` given to ``emit`` in the compiling thread, with
the Python stack at that moment. Nothing here compiles, runs or transfers anything. jax is
imported lazily (:meth:`CompileWatch.install`).
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lazyscope.backends.torchax.explain import Miss, parse_miss
from lazyscope.model import GraphMemory, Stack
from lazyscope.model.ownership import capture_stack, is_library_file

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: the logger JAX's cache-miss explanations go to
EXPLAIN_LOGGER = "jax._src.interpreters.partial_eval"
#: the packages whose frames are machinery between the program and a compilation (JAX,
#: torchax, torch's dispatch; lazyscope's own): the first frame outside them says whose it is
MACHINERY = frozenset({"jax", "jaxlib", "torchax", "torch", "lazyscope", "numpy"})


@dataclass
class RawCompile:
    """One compilation as JAX reported it."""

    #: JAX's name of the compiled module (``jit(call_torch)``, ``jit(broadcast_in_dim)``)
    module: str
    compile_s: float
    trace_s: float = 0.0
    lower_s: float = 0.0
    memory: GraphMemory | None = None
    stack: Stack = ()
    misses: list[Miss] = field(default_factory=list)
    #: whose it is outside a jitted call: ``op`` (an op the program ran eagerly), ``library``
    #: (a library's own: a PRNG seed, an optimizer's init)
    owner: str = "op"

    @property
    def seconds(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s


def memory_of(executable: Any) -> GraphMemory | None:
    """An executable's ``CompiledMemoryStats`` as a :class:`GraphMemory` (bytes); None where the
    runtime does not say."""
    try:
        stats = executable.get_compiled_memory_stats()
    except Exception:  # noqa: BLE001 - unsupported on this runtime
        return None
    return GraphMemory(inputs=int(stats.argument_size_in_bytes),
                       outputs=int(stats.output_size_in_bytes),
                       aliased=int(stats.alias_size_in_bytes),
                       intermediates=int(stats.temp_size_in_bytes),
                       program=int(stats.generated_code_size_in_bytes))


def whose(skip: int = 1) -> str:
    """``op`` when the innermost frame outside :data:`MACHINERY` (by module) and the standard
    library is the user's (an op of the program, run eagerly), else ``library``."""
    f: Any = sys._getframe(skip + 1)
    while f is not None:
        module = str(f.f_globals.get("__name__", "")).partition(".")[0]
        file = f.f_code.co_filename
        if module not in MACHINERY and not file.startswith(_STDLIB) and \
                not file.startswith("<"):
            return "library" if is_library_file(file) else "op"
        f = f.f_back
    return "library"


_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


class _Capture(logging.Handler):
    """Takes JAX's cache-miss explanations to the watch instead of the log."""

    def __init__(self, watch: CompileWatch):
        super().__init__(logging.WARNING)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        try:
            miss = parse_miss(record.getMessage())
        except Exception:  # noqa: BLE001 - never break the program's logging
            return
        if miss is not None:
            self.watch.pending().misses.append(miss)


@dataclass
class _Pending:
    trace_s: float = 0.0
    lower_s: float = 0.0
    memory: GraphMemory | None = None
    misses: list[Miss] = field(default_factory=list)


class CompileWatch:
    """Installs the listener, the log capture and the executable hook (module docstring)."""

    def __init__(self, emit: Callable[[RawCompile], None]):
        self.emit = emit
        self._local = threading.local()
        self._jax: Any = None
        self._compiler: Any = None
        self._original: Any = None
        self._handler: _Capture | None = None
        self._saved: tuple[Any, ...] | None = None
        #: compilations seen (JAX's count)
        self.count = 0
        #: memory is read from each executable
        self.memory_measured = False

    def pending(self) -> _Pending:
        p: _Pending | None = getattr(self._local, "pending", None)
        if p is None:
            p = self._local.pending = _Pending()
        return p

    def install(self) -> None:
        import jax
        import jax.monitoring

        self._jax = jax
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        logger = logging.getLogger(EXPLAIN_LOGGER)
        self._saved = (jax.config.jax_explain_cache_misses, logger.propagate, logger.level)
        self._handler = _Capture(self)
        logger.addHandler(self._handler)
        logger.propagate = False  # explained in the report, not printed
        if logger.level > logging.WARNING or logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
        jax.config.update("jax_explain_cache_misses", True)
        try:
            from jax._src import compiler

            original = compiler.compile_or_get_cached
        except (ImportError, AttributeError):
            return
        self._compiler, self._original = compiler, original
        watch = self

        def compile_or_get_cached(*args: Any, **kwargs: Any) -> Any:
            executable = original(*args, **kwargs)
            memory = memory_of(executable)
            if memory is not None:
                watch.pending().memory = memory
            return executable

        compiler.compile_or_get_cached = compile_or_get_cached
        self.memory_measured = True

    def uninstall(self) -> None:
        jax = self._jax
        if jax is None:
            return
        try:
            jax.monitoring.unregister_event_duration_listener(self._on_duration)
        except Exception:  # noqa: BLE001 - already gone
            pass
        logger = logging.getLogger(EXPLAIN_LOGGER)
        if self._handler is not None:
            logger.removeHandler(self._handler)
            self._handler = None
        if self._saved is not None:
            explain, propagate, level = self._saved
            logger.propagate = propagate
            logger.setLevel(level)
            jax.config.update("jax_explain_cache_misses", explain)
            self._saved = None
        if self._compiler is not None and self._original is not None:
            self._compiler.compile_or_get_cached = self._original
            self._compiler = self._original = None
        self._jax = None

    def _on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == TRACE_EVENT:
            self.pending().trace_s += duration
        elif event == LOWER_EVENT:
            self.pending().lower_s += duration
        elif event == COMPILE_EVENT:
            p = self.pending()
            self._local.pending = None
            self.count += 1
            raw = RawCompile(str(kwargs.get("fun_name", "")), duration, p.trace_s, p.lower_s,
                             p.memory, capture_stack(2), p.misses, whose(2))
            self.emit(raw)
