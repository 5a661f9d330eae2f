"""Record every read of an XLA tensor's value by Python: the host syncs of a LazyTensor program.

A read (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``if tensor:``, ``int(t)``,
``float(t)``, ``print(t)``/``repr``/``format``) stalls the host until the tensor is on it; when the
tensor still has pending IR it also forces an execution (and maybe a compilation) outside the step
barrier. PT_XLA_DEBUG only reports reads that executed something, and a transfer of an already
materialised tensor executes nothing, so the reads are recorded here, at the Python level: the
``torch.Tensor`` methods above are wrapped for the duration of a trace and restored after.

A wrapper checks ``tensor.device.type == "xla"`` and otherwise calls straight through; for an XLA
tensor it times the call, notes whether an execution happened (the ``ExecuteTime`` sample count,
a structured metric read) and emits one ``sync`` event at the user's line. Only the outermost
read is recorded (``print(t)`` calls ``.cpu()`` and more inside). The wrappers add no
computation, transfer or compilation of their own.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from lazyscope.backends.frames import is_library_file
from lazyscope.model import Event, Site

#: torch.Tensor attribute -> how the read is named in reports
READ_METHODS = {
    "item": ".item()",
    "tolist": ".tolist()",
    "cpu": ".cpu()",
    "numpy": ".numpy()",
    "__bool__": "if tensor / bool(tensor)",
    "__int__": "int(tensor)",
    "__float__": "float(tensor)",
    "__index__": "tensor used as an index",
    "__repr__": "print(tensor) / repr",
    "__format__": "f-string / format(tensor)",
}
MAX_FRAMES = 12


def python_frames(skip: int = 2, limit: int = MAX_FRAMES) -> list[Site]:
    """The Python stack (innermost first) above the caller, without walking all of it."""
    frames: list[Site] = []
    try:
        f: Any = sys._getframe(skip)
    except ValueError:  # a shallow stack (the autograd engine's thread)
        return frames
    while f is not None and len(frames) < 64:
        frames.append(Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    # keep the innermost user frame and a little context around it
    for i, site in enumerate(frames):
        if not is_library_file(site.file):
            return frames[max(0, i - 2): i + limit]
    return frames[:limit]


class ValueReadHooks:
    """Installs the wrappers on ``torch.Tensor``; ``emit(event)`` receives one per read."""

    def __init__(self, emit: Callable[[Event], None], step_index: Callable[[], int],
                 executions: Callable[[], int]):
        self._emit = emit
        self._step_index = step_index
        self._executions = executions
        self._saved: dict[str, Any] = {}
        self._depth = 0

    def install(self) -> None:
        import torch

        for name, label in READ_METHODS.items():
            original = getattr(torch.Tensor, name, None)
            if original is None:
                continue
            self._saved[name] = torch.Tensor.__dict__.get(name, original)
            setattr(torch.Tensor, name, self._wrap(original, label))

    def uninstall(self) -> None:
        import torch

        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved = {}

    def _wrap(self, original: Any, label: str) -> Any:
        hooks = self

        def read(self_t: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                is_xla = hooks._depth == 0 and self_t.device.type == "xla"
            except Exception:  # noqa: BLE001 - odd subclasses: just call through
                is_xla = False
            if not is_xla:
                return original(self_t, *args, **kwargs)
            hooks._depth += 1
            execs_before = hooks._executions()
            tic = time.perf_counter()
            try:
                return original(self_t, *args, **kwargs)
            finally:
                seconds = time.perf_counter() - tic
                executed = hooks._executions() - execs_before
                hooks._depth -= 1
                frames = python_frames()
                site = next((f for f in frames if not is_library_file(f.file)), None)
                hooks._emit(Event(
                    kind="sync", step=hooks._step_index(), seconds=seconds, site=site,
                    frames=frames,
                    data={"read": label, "executions": executed,
                          "shape": list(getattr(self_t, "shape", []))},
                ))

        read.__name__ = getattr(original, "__name__", "read")
        read.__qualname__ = getattr(original, "__qualname__", read.__name__)
        read.__doc__ = getattr(original, "__doc__", None)
        return read
