"""Find the user's source line of each ``aten::`` op that torch_xla runs on the CPU.

torch_xla counts fallbacks exactly (``executed_fallback_ops()`` and one ``aten::<op>`` counter
each) but says nothing about where they were called. The collector therefore watches the torch
functions called by Python with a :class:`torch.overrides.TorchFunctionMode` only while it needs
to: during the warm-up steps (already slow: they compile) and for one step after a step in which
a fallback op was counted that has no call site yet. The mode looks at each function's name; when
it has the base name of a fallback op (``torch.histc`` for ``aten::histc``) it records the
innermost user frame and the call's wall time.

A *function* mode, not a dispatch mode: it sits above the dispatcher and calls every function
unchanged, so the ops torch_xla records, and so its graphs and their hashes, are exactly those of
an untraced run. (A ``TorchDispatchMode`` does not have that property: under one, composite ops
are decomposed differently, the graphs change and the traced run compiles more than the untraced
one — measured on the decoder, 5 compilations against 3.) Ops called from autograd's backward
pass are not seen by a function mode; their fallbacks are counted but get no call site.
"""

from __future__ import annotations

import time
from typing import Any

from lazyscope.backends.frames import is_library_file
from lazyscope.backends.xla_reads import python_frames
from lazyscope.model import Site


def op_base(name: str) -> str:
    """``aten::median.dim_values`` -> ``median``; ``aten::add_`` -> ``add``."""
    base = name.split("::", 1)[-1].split(".", 1)[0]
    return base.rstrip("_") or base


def make_watcher(targets: set[str] | None, calls: dict[tuple[str, str, int, str], list[float]]) -> Any:
    """A function mode recording ``(op, file, line, function) -> [seconds, ...]``.

    ``targets`` are op base names to look for; ``None`` watches every op whose name torch_xla's
    fallback table will later confirm (the collector filters against the counters).
    """
    from torch.overrides import TorchFunctionMode

    class FallbackWatcher(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", "") or ""
            watched = bool(name) and (targets is None or op_base(name) in targets)
            if not watched:
                return func(*args, **(kwargs or {}))
            tic = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            seconds = time.perf_counter() - tic
            frames = python_frames(skip=2, limit=4)
            site = next((f for f in frames if not is_library_file(f.file)), None)
            if site is not None:
                calls.setdefault((name, site.file, site.line, site.function), []).append(seconds)
            return out

    return FallbackWatcher()


class FallbackSites:
    """Turns the watcher's raw calls into per-op call sites once the counters confirm the op."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str, int, str], list[float]] = {}
        self._mode: Any = None
        self.sited: set[str] = set()  # fallback op bases that already have a call site

    @property
    def active(self) -> bool:
        return self._mode is not None

    def enable(self, targets: set[str] | None) -> None:
        if self._mode is not None:
            return
        self._mode = make_watcher(targets, self.calls)
        self._mode.__enter__()

    def disable(self) -> None:
        if self._mode is None:
            return
        mode, self._mode = self._mode, None
        mode.__exit__(None, None, None)

    def take(self, fallback_ops: set[str]) -> list[tuple[str, Site, int, float]]:
        """``(op, site, calls, seconds)`` for recorded calls of confirmed fallback ops; clears."""
        bases = {op_base(op): op for op in fallback_ops}
        out = []
        for (name, file, line, function), times in self.calls.items():
            op = bases.get(op_base(name))
            if op is None:
                continue
            out.append((op, Site(file, line, function), len(times), sum(times)))
            self.sited.add(op_base(op))
        self.calls = {}
        return out
