"""Record every read of an XLA tensor's value by Python: the host syncs of a LazyTensor program.

A read (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``if tensor:``, ``int(t)``,
``float(t)``, ``print(t)``/``repr``/``format``) stalls the host until the tensor is on it; when the
tensor still has pending IR it also forces an execution (and maybe a compilation) outside the step
barrier. PT_XLA_DEBUG only reports reads that executed something, and a transfer of an already
materialised tensor executes nothing, so the reads are recorded here, at the Python level: the
``torch.Tensor`` methods above are wrapped for the duration of a trace and restored after.

A wrapper checks ``tensor.device.type == "xla"`` and otherwise calls straight through; for an XLA
tensor it times the call, notes whether the tensor was still pending IR (the read cuts the step's
graph) or device data already (a read after the barrier), and whether an execution happened (the
``ExecuteTime`` sample count, a structured metric read), and emits one ``sync`` event with the
user's stack. It also says
whether the read runs inside a step closure (after the barrier; ``closure``) and whether
torch_xla itself made it for its own purposes (``owner``). Only the outermost read is recorded
(``print(t)`` calls ``.cpu()`` and more inside). The wrappers add no computation, transfer or
compilation of their own.

Reads that happen inside a torch op (``torch.linalg.inv`` checks a flag on the host) never go
through these methods; :mod:`lazyscope.backends.xla.watch` finds them.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from lazyscope.backends.sampler import mark
from lazyscope.backends.xla.causes import closure_kind, library_call, library_caller
from lazyscope.model import OWNER_LIBRARY, Frame, Stack, Sync
from lazyscope.model.ownership import bound_stack, make_frame

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
MAX_WALK = 64


def walk_frames(skip: int) -> list[Frame]:
    """The Python stack above the caller (innermost first), classified, at most MAX_WALK."""
    frames: list[Frame] = []
    try:
        f: Any = sys._getframe(skip + 1)
    except ValueError:  # a shallow stack (the autograd engine's thread)
        return frames
    while f is not None and len(frames) < MAX_WALK:
        code = f.f_code
        frames.append(make_frame(code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    return frames


def read_event_data(frames: list[Frame], label: str, shape: list[int],
                    pending: bool | None = None) -> tuple[Stack, Sync]:
    """The stack an event keeps and its Sync payload, from a full walk of the stack."""
    api = library_call(frames)
    payload = Sync(read=label, shape=shape, closure=closure_kind(frames),
                   owner=OWNER_LIBRARY if api else "user", pending=pending)
    if api:
        payload.read = f"{label} by {api}"
        payload.api = api
        payload.called_by = library_caller(frames)
    return bound_stack(frames), payload


def _traced(tensor: Any) -> bool:
    """A tensor with no value to read: a fake or functional tensor of torch.compile's tracing
    (AOTAutograd prints them while it compiles a scan or a compiled function: no transfer
    happens, torch_xla counts none)."""
    name = type(tensor).__name__
    if name in ("FakeTensor", "FunctionalTensor") or "Proxy" in name:
        return True
    try:
        import torch

        return bool(torch.compiler.is_compiling())
    except Exception:  # noqa: BLE001 - an old torch
        return False


def has_pending_ir(tensor: Any) -> bool | None:
    """True when reading ``tensor`` must first run a graph (it is pending IR), False when it is
    device data already (a read after the step's barrier: it cuts no graph), None when torch_xla
    does not say.

    torch_xla's own test of it (``_check_tensor_need_materialization``) looks only at what the
    tensor holds: a data handle, or an IR node that is or is not device data. It reads no data,
    and the data of a step still executing is a placeholder that torch_xla's execution thread
    fills in when the step finishes. An earlier walk of the tensor's IR asked each device data
    node for its handle, which for an SPMD placeholder is its first shard, moved in by that
    thread: ``loss.item()`` right after an SPMD step's ``torch_xla.sync()`` crashed the program
    with SIGSEGV in about half the runs of a 300-step loop."""
    try:
        import torch_xla

        return bool(torch_xla._XLAC._check_tensor_need_materialization([tensor])[0])
    except Exception:  # noqa: BLE001 - another torch_xla, or a tensor it cannot say about
        return None


class ValueReadHooks:
    """Installs the wrappers on ``torch.Tensor``; ``emit(stack, payload, seconds, executions)``
    receives one call per read.

    Another backend's tensors reuse the same wrappers: ``cls`` is the class whose methods are
    wrapped (a ``torch.Tensor`` subclass such as torchax's), ``methods`` the attributes and how
    reads through them are named, ``is_mine(tensor)`` which tensors are read from a device
    (default: an XLA tensor that is not a tracing fake), ``pending(tensor)`` whether the value
    still had to be computed (see :func:`has_pending_ir`). :meth:`wrap_function` wraps a plain
    function that reads its first argument (``jax.device_get``); every wrapper of one instance
    shares one depth, so only the outermost read is recorded."""

    def __init__(self, emit: Callable[[Stack, Sync, float, int], None],
                 executions: Callable[[], int], *, cls: Any = None,
                 methods: dict[str, str] | None = None,
                 is_mine: Callable[[Any], bool] | None = None,
                 pending: Callable[[Any], bool | None] = has_pending_ir,
                 span: Callable[[], Any] | None = None):
        self._emit = emit
        self._executions = executions
        self._cls = cls
        self._methods = READ_METHODS if methods is None else methods
        self._is_mine = is_mine or _xla_tensor
        self._pending = pending
        #: a context manager naming the read in a profile being captured, or None
        self._span = span or (lambda: None)
        self._saved: dict[str, Any] = {}
        self._local = threading.local()

    @property
    def depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def install(self) -> None:
        import torch

        cls = self._cls if self._cls is not None else torch.Tensor
        for name, label in self._methods.items():
            original = getattr(cls, name, None)
            if original is None:
                continue
            self._saved[name] = cls.__dict__.get(name, _INHERITED)
            setattr(cls, name, self._wrap(original, label))

    def uninstall(self) -> None:
        import torch

        cls = self._cls if self._cls is not None else torch.Tensor
        for name, original in self._saved.items():
            if original is _INHERITED:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        self._saved = {}

    def wrap_function(self, original: Any, label: str) -> Any:
        """``original(x, ...)`` wrapped as a read of ``x`` (when ``is_mine(x)``)."""
        return self._wrap(original, label)

    def _wrap(self, original: Any, label: str) -> Any:
        hooks = self
        local = self._local
        mine = self._is_mine

        def read(self_t: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                is_read = getattr(local, "depth", 0) == 0 and mine(self_t)
            except Exception:  # noqa: BLE001 - odd subclasses: just call through
                is_read = False
            if not is_read:
                return original(self_t, *args, **kwargs)
            local.depth = 1
            pending = hooks._pending(self_t)
            execs_before = hooks._executions()
            span = hooks._span()
            tic = time.perf_counter()
            try:
                if span is None:
                    return original(self_t, *args, **kwargs)
                with span:
                    return original(self_t, *args, **kwargs)
            finally:
                seconds = time.perf_counter() - tic
                executed = hooks._executions() - execs_before
                local.depth = 0
                stack, payload = read_event_data(walk_frames(1), label,
                                                 list(getattr(self_t, "shape", [])), pending)
                hooks._emit(stack, payload, seconds, executed)

        mark(read, "sync")
        read.__name__ = getattr(original, "__name__", "read")
        read.__qualname__ = getattr(original, "__qualname__", read.__name__)
        read.__doc__ = getattr(original, "__doc__", None)
        return read


#: a wrapped attribute the class did not define itself (inherited): deleted again on uninstall
_INHERITED = object()


def _xla_tensor(tensor: Any) -> bool:
    return bool(tensor.device.type == "xla") and not _traced(tensor)
