"""Find the user's line of every CPU fallback and every hidden host sync, whatever the Python
name of the call during which it happened.

torch_xla counts fallbacks exactly (``executed_fallback_ops()``, one ``aten::<op>`` counter each)
and device-to-host transfers (``TransferFromDeviceTime``), but says nothing about where they
came from. While a *watch window* is open, a :class:`torch.overrides.TorchFunctionMode` sees
every outermost torch call made from Python (``torch.stft``, ``x[x > 0.5]``,
``F.adaptive_avg_pool2d`` inside ``nn.AdaptiveAvgPool2d``, ``torch.linalg.inv``,
``loss.backward()``), reads those counters before and after it (each read is well under a
microsecond) and attributes any increase to the call's user stack:

* a fallback counter that grew -> a ``fallback`` event (op, calls, wall time, ``via``: the
  Python call when it is not the op itself);
* ``aten::_local_scalar_dense`` or the device-to-host transfers grew with no fallback -> a
  hidden ``sync`` inside a torch op (``torch.linalg.inv`` checking its info flag on the host).

Fallbacks of autograd's backward pass happen during ``loss.backward()``; an
``aten::X_backward`` op is attributed to the forward call ``X`` seen in the same window (the
forward line that created it), else to the ``backward()`` line.

The collector opens the window during warm-up and for one step after a fallback op or a
transfer appeared that has no site yet, so steady steps pay nothing. A *function* mode, not a
dispatch mode: it sits above the dispatcher and calls every function unchanged, so torch_xla
records exactly the ops (and compiles exactly the graphs) of an untraced run; under a
``TorchDispatchMode`` composite ops decompose differently and the graphs change.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import dataclass
from typing import Any

from lazyscope.backends.xla.causes import closure_kind, library_call
from lazyscope.backends.xla.reads import READ_METHODS, walk_frames
from lazyscope.model import OWNER_LIBRARY, Stack
from lazyscope.model.ownership import bound_stack

SCALAR_READ_OP = "aten::_local_scalar_dense"
TRANSFER_METRIC = "TransferFromDeviceTime"
#: calls the value-read hooks record already
_READS = frozenset(READ_METHODS)


def op_base(op: str) -> str:
    """``aten::median.dim_values`` -> ``median``; ``aten::add_`` -> ``add``;
    ``aten::_adaptive_avg_pool2d_backward`` -> ``_adaptive_avg_pool2d_backward``."""
    base = op.split("::", 1)[-1].split(".", 1)[0]
    return base.rstrip("_") or base


#: forward aten ops that Python calls under another name (the torch function the watch window
#: sees): the site of a backward op's forward is that call's
_CALLED_AS = {
    "upsample_bilinear2d": "interpolate", "upsample_nearest2d": "interpolate",
    "upsample_bicubic2d": "interpolate", "upsample_linear1d": "interpolate",
    "upsample_trilinear3d": "interpolate", "upsample_nearest1d": "interpolate",
    "upsample_nearest3d": "interpolate", "grid_sampler_2d": "grid_sample",
    "adaptive_avg_pool2d": "adaptive_avg_pool2d", "adaptive_max_pool2d": "adaptive_max_pool2d",
}


def forward_name(op: str) -> str | None:
    """The forward function name of a backward op: ``aten::_adaptive_avg_pool2d_backward`` ->
    ``adaptive_avg_pool2d``; None for a forward op."""
    base = op_base(op)
    if not base.endswith("_backward"):
        return None
    return base[: -len("_backward")].lstrip("_")


@dataclass
class Hit:
    """Something the watcher attributed to a call site."""

    kind: str  # "fallback" | "sync"
    what: str  # the op, or the torch call during which the host synced
    stack: Stack
    calls: int
    seconds: float
    via: str = ""
    backward: bool = False
    closure: str = ""
    owner: str = "user"


class Counters:
    """Reads torch_xla's fallback counters and device-to-host transfer count."""

    def __init__(self, met: Any):
        self.met = met

    def fallbacks(self) -> dict[str, int]:
        met = self.met
        return {op: int(met.counter_value(op) or 0) for op in met.executed_fallback_ops()}

    def transfers(self) -> int:
        data = self.met.metric_data(TRANSFER_METRIC)
        return int(data[0]) if data else 0


class CallWatch:
    """The watch window: :meth:`enable` / :meth:`disable` it; :meth:`take` the hits so far.

    Torch function modes are per thread: the window is opened and closed in the calling
    thread (the thread that runs the program's steps; with one thread per device, each)."""

    def __init__(self, counters: Counters):
        self.counters = counters
        self.hits: list[Hit] = []
        self.sites_by_name: dict[str, tuple[Stack, str, str]] = {}
        self._modes: dict[int, Any] = {}

    @property
    def active(self) -> bool:
        return threading.get_ident() in self._modes

    def enable(self) -> None:
        thread = threading.get_ident()
        if thread not in self._modes:
            mode = _make_mode(self)
            mode.__enter__()
            self._modes[thread] = mode

    def disable(self) -> None:
        mode = self._modes.pop(threading.get_ident(), None)
        if mode is not None:
            mode.__exit__(None, None, None)

    def take(self) -> list[Hit]:
        hits, self.hits = self.hits, []
        return hits

    # -- called by the mode for each outermost torch call --------------------------------
    def observe(self, name: str, before: tuple[dict[str, int], int],
                after: tuple[dict[str, int], int], seconds: float) -> None:
        (fb0, d2h0), (fb1, d2h1) = before, after
        grown = {op: n - fb0.get(op, 0) for op, n in fb1.items() if n > fb0.get(op, 0)}
        scalar = grown.pop(SCALAR_READ_OP, 0)
        need_site = bool(grown) or bool(scalar) or d2h1 > d2h0
        if name and name not in self.sites_by_name and not need_site:
            frames = walk_frames(2)
            self.sites_by_name[name] = (bound_stack(frames), closure_kind(frames),
                                        library_call(frames))
            return
        if not need_site:
            return
        frames = walk_frames(2)
        stack = bound_stack(frames)
        closure, api = closure_kind(frames), library_call(frames)
        owner = OWNER_LIBRARY if api else "user"
        if name:
            self.sites_by_name.setdefault(name, (stack, closure, api))
        for op, n in grown.items():
            forward = forward_name(op)
            if forward is not None and forward not in self.sites_by_name:
                forward = _CALLED_AS.get(forward, forward)
            if forward is not None and forward in self.sites_by_name:
                fstack, fclosure, _ = self.sites_by_name[forward]
                self.hits.append(Hit("fallback", op, fstack, n, seconds, via=forward,
                                     backward=True, closure=fclosure))
                continue
            via = "" if op_base(op).lstrip("_") == name.lstrip("_") else name
            self.hits.append(Hit("fallback", op, stack, n, seconds, via=via,
                                 backward=forward is not None, closure=closure, owner=owner))
        if not grown and (scalar or d2h1 > d2h0):
            self.hits.append(Hit("sync", name or "a torch op", stack, max(scalar, d2h1 - d2h0),
                                 seconds, closure=closure, owner=owner))


def _call(func, args, kwargs):  # noqa: ANN001, ANN202 - the trampolines' template
    return func(*args, **kwargs)


_TEMPLATE = _call.__code__
#: (file, line, function) of a calling line -> its trampoline
_TRAMPOLINES: dict[tuple[str, int, str], Any] = {}
_MAX_TRAMPOLINES = 8192


def trampoline(caller: Any) -> Any:
    """A function that calls ``func(*args, **kwargs)`` from a frame that carries the calling
    line's file, line and function name.

    torch_xla's IR debug records, for each IR node, the innermost Python frame at the time the
    node is made: inside the watch window that would be the mode's own frame for every torch
    function implemented in C, and every op traced in warm-up would be placed in lazyscope
    instead of the user's line. The trampoline's code object is the template's with the
    caller's ``co_filename``, ``co_name`` and a first line one above the caller's line (its call
    instruction sits on the template's second line), so the innermost frame reads as the line
    that called the torch function, exactly what an unwatched run records."""
    code = caller.f_code
    key = (code.co_filename, caller.f_lineno or 0, code.co_name)
    fn = _TRAMPOLINES.get(key)
    if fn is None:
        if key[1] < 2 or len(_TRAMPOLINES) >= _MAX_TRAMPOLINES:
            return _call
        replaced = _TEMPLATE.replace(co_filename=key[0], co_name=key[2],
                                     co_firstlineno=key[1] - 1,
                                     **({"co_qualname": key[2]}
                                        if hasattr(_TEMPLATE, "co_qualname") else {}))
        # the caller's globals: warnings and loggers that look at the frame's module see
        # the caller's
        fn = _TRAMPOLINES[key] = types.FunctionType(replaced, caller.f_globals)
    return fn


def _make_mode(watch: CallWatch) -> Any:
    from torch.overrides import TorchFunctionMode

    counters = watch.counters

    class CallWatcher(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", "") or ""
            if name in _READS:
                return func(*args, **(kwargs or {}))
            before = (counters.fallbacks(), counters.transfers())
            call = trampoline(sys._getframe(1))
            tic = time.perf_counter()
            out = call(func, args, kwargs or {})
            seconds = time.perf_counter() - tic
            watch.observe(name, before, (counters.fallbacks(), counters.transfers()), seconds)
            return out

    return CallWatcher()
