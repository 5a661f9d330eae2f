"""How long each CUDA host sync made the host wait: the stall time of a ``sync`` event.

``torch.cuda.set_sync_debug_mode("warn")`` says *that* an operation synchronised and, through the
Python stack at the warning, *where*; it does not say for how long. torch raises that warning
when the C++ call returns to Python, after the wait. So the tensor methods through which Python
code reads a CUDA value (``item``, ``tolist``, ``cpu``, ``to``, ``numpy``, ``__bool__``,
``__float__``, ``__int__``) are wrapped with a clock: a sync warning raised inside one of them
is held until the method returns, then recorded with the method's duration, which is the
host's wait for the device to finish the work queued before the read (plus the copy itself).

A sync raised anywhere else (inside an op that checks a value on the host, such as
``torch.nonzero`` or a boolean index, or inside compiled code) is recorded at once, with no
stall time (0 s): only its line is known.

The wrappers measure and never synchronise themselves: a program's syncs are exactly the ones it
had. Under ``torch.compile`` tracing they call the original method at once (dynamo sees the
method it always saw). The timer is installed only on CUDA runs, and :meth:`StallTimer.remove`
puts every original method back.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from lazyscope.backends.sampler import mark

#: the torch.Tensor methods through which Python reads a device value
TIMED_READS = ("item", "tolist", "cpu", "to", "numpy", "__bool__", "__float__", "__int__")

#: (message, stack, stall seconds) -> record one sync event
Record = Callable[[str, Any, float], None]


class StallTimer:
    """Times the host reads of CUDA values; :meth:`sync` takes each sync warning."""

    def __init__(self, record: Record):
        self._record = record
        self._local = threading.local()
        #: name -> (the original, whether ``cls`` itself defined it)
        self._saved: dict[str, tuple[Any, bool]] = {}

    # -- installing --------------------------------------------------------------------------
    def install(self, cls: Any = None) -> None:
        """Wrap the read methods of ``cls`` (``torch.Tensor``)."""
        if cls is None:
            import torch

            cls = torch.Tensor
        self._cls = cls
        for name in TIMED_READS:
            original = getattr(cls, name, None)
            if original is None or name in self._saved:
                continue
            self._saved[name] = (original, name in vars(cls))
            setattr(cls, name, self._timed(original))

    def remove(self) -> None:
        """Put every wrapped method back (a method the class inherited is inherited again)."""
        for name, (original, own) in self._saved.items():
            if own:
                setattr(self._cls, name, original)
            else:
                delattr(self._cls, name)
        self._saved = {}

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    # -- the clock ---------------------------------------------------------------------------
    def _timed(self, original: Any) -> Any:
        timer = self
        compiling = _is_compiling()

        @functools.wraps(original)
        def timed(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if compiling():  # first: dynamo folds it to True and traces the original alone
                return original(tensor, *args, **kwargs)
            local = timer._local
            if getattr(local, "depth", 0):
                return original(tensor, *args, **kwargs)
            local.depth = 1
            local.pending = []
            start = time.perf_counter()
            try:
                return original(tensor, *args, **kwargs)
            finally:
                stall = time.perf_counter() - start
                local.depth = 0
                pending, local.pending = local.pending, []
                for message, stack in pending:
                    timer._record(message, stack, stall)
                    stall = 0.0  # one wait: the first sync of the call holds it

        mark(timed, "sync")
        return _not_a_frame_to_compile(timed)

    def sync(self, message: str, stack: Any) -> None:
        """A sync warning: held until the timed read it happened in returns, else recorded now
        with no stall time."""
        local = self._local
        if getattr(local, "depth", 0):
            local.pending.append((message, stack))
        else:
            self._record(message, stack, 0.0)


def _not_a_frame_to_compile(fn: Any) -> Any:
    """``fn`` with its own frame skipped by dynamo (``torch.compiler.disable(fn,
    recursive=False)``): called from eager code (an ``.item()`` at a graph break), dynamo would
    otherwise try to compile the wrapper itself and count a graph break in lazyscope's file.
    Traced code never calls it: dynamo resolves tensor methods by name."""
    try:
        import torch

        return torch.compiler.disable(fn, recursive=False)
    except (ImportError, AttributeError, TypeError):
        return fn


def _is_compiling() -> Callable[[], bool]:
    """``torch.compiler.is_compiling`` (dynamo reads it as True while it traces), or a function
    that says False on a torch without it."""
    try:
        import torch

        return torch.compiler.is_compiling  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        return lambda: False
