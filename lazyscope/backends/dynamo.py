"""Collect torch.compile (dynamo/inductor) compilations and graph breaks from structured sources.

Sources, all structured (no human log is parsed), each feature-detected so a newer or older
torch degrades to a recorded note instead of a crash:

* ``torch._dynamo.utils.get_compilation_metrics()``: one ``CompilationMetrics`` record per
  dynamo frame compilation, with ``co_name``/``co_filename``/``co_firstlineno``, the duration,
  ``recompile_reason`` (the first guard failure, computed by
  ``guards.get_and_maybe_log_recompilation_reasons`` whether or not a log is enabled),
  ``num_graph_breaks``, ``fail_type``/``fail_reason``. New records are taken at each barrier.
* ``torch._dynamo.callback.callback_handler`` start callbacks: the Python stack at the moment a
  compilation starts, so a compilation is tied to the user's line that triggered it.
* ``torch._dynamo.symbolic_convert.log_graph_break`` (wrapped for the trace): the reason and the
  user's stack (``FrameSummary`` objects) of each graph break. Without it, the reasons (no
  lines) are taken from ``torch._dynamo.utils.counters["graph_break"]``.

The pure helpers (:func:`parse_guard_failure`, :func:`compile_event_data`) take plain values
and are unit-tested without torch.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from typing import Any

from lazyscope.backends.frames import user_site
from lazyscope.model import Event, Site

#: compilation records kept by torch; raised for the trace so a busy step loses none
METRICS_LIMIT = 4096

_SIZE_RE = re.compile(
    r"(?:tensor\s+)?'?(?P<tensor>[^'\s]+)'?\s+(?P<what>size|stride) mismatch at index "
    r"(?P<index>-?\d+)\.\s+expected\s+(?P<expected>-?\d+),\s+actual\s+(?P<actual>-?\d+)"
)
_PREFIX_RE = re.compile(r"^\s*(?P<cid>\d+/\d+):\s*")


def parse_guard_failure(reason: str | None) -> dict[str, Any] | None:
    """The varying dimension named by a dynamo guard failure, or None.

    ``"0/0: tensor 'x' size mismatch at index 1. expected 64, actual 97"`` ->
    ``{"tensor": "x", "what": "size", "index": 1, "expected": 64, "actual": 97,
    "failed_entry": "0/0"}``.
    """
    if not reason:
        return None
    match = _SIZE_RE.search(reason)
    if match is None:
        return None
    out: dict[str, Any] = {
        "tensor": match["tensor"],
        "what": match["what"],
        "index": int(match["index"]),
        "expected": int(match["expected"]),
        "actual": int(match["actual"]),
    }
    prefix = _PREFIX_RE.match(reason)
    if prefix:
        out["failed_entry"] = prefix["cid"]
    return out


def _get(record: Any, name: str) -> Any:
    if isinstance(record, dict):
        return record.get(name)
    return getattr(record, name, None)


def compile_seconds(record: Any) -> float:
    """A compilation record's duration in seconds (``duration_us`` or the legacy field)."""
    duration = _get(record, "duration_us")
    if isinstance(duration, (int, float)):
        return float(duration) / 1e6
    legacy = _get(record, "entire_frame_compile_time_s")
    return float(legacy) if isinstance(legacy, (int, float)) else 0.0


def is_frame_compile(record: Any) -> bool:
    """True for a dynamo frame compilation (not a lazy backward or runtime record)."""
    return _get(record, "is_forward") is not False and not _get(record, "is_runtime")


def compile_event_data(record: Any) -> dict[str, Any]:
    """The ``data`` of a ``compile`` event from a ``CompilationMetrics`` record (or a dict)."""
    reason = _get(record, "recompile_reason")
    name = _get(record, "co_name") or "?"
    code = f"{_get(record, 'co_filename') or '?'}:{_get(record, 'co_firstlineno') or 0}"
    if not is_frame_compile(record):
        cause_kind = "backward" if _get(record, "is_forward") is False else "runtime"
        cause = f"{cause_kind} compilation of {name}"
    elif reason:
        cause_kind, cause = "recompile", f"recompiling {name}: guard failed: {reason}"
    else:
        cause_kind, cause = "first", f"first compilation of {name} ({code})"
    data: dict[str, Any] = {
        "compile_id": str(_get(record, "compile_id") or ""),
        "frame": name,
        "code": code,
        "cause": cause,
        "cause_kind": cause_kind,
        "recompile_reason": reason,
        "varying": parse_guard_failure(reason),
        "num_graph_breaks": _get(record, "num_graph_breaks"),
        "graph_ops": _get(record, "graph_op_count"),
        "cache_size": _get(record, "cache_size"),
        "has_guarded_code": _get(record, "has_guarded_code"),
    }
    fail = _get(record, "fail_type")
    if fail:
        data["fail_type"] = fail
        data["fail_reason"] = _get(record, "fail_reason")
    return data


def frames_from_summary(stack: Any) -> list[Site]:
    """Sites, innermost first, from a traceback ``StackSummary`` (outermost first)."""
    sites = []
    for frame in reversed(list(stack or [])):
        sites.append(Site(str(frame.filename), int(frame.lineno or 0), str(frame.name)))
    return sites


@dataclass
class Drained:
    """What dynamo did since the previous barrier."""

    compiles: list[Event] = field(default_factory=list)  # frame compilations
    other: list[Event] = field(default_factory=list)  # backward/runtime compilations
    graph_breaks: list[Event] = field(default_factory=list)

    @property
    def compile_seconds(self) -> float:
        return sum(e.seconds for e in self.compiles + self.other)


class DynamoCollector:
    """Installs the hooks for a trace; ``drain(step)`` returns the events since the last call."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._seen: list[Any] = []  # references keep ids unique
        self._seen_ids: set[int] = set()
        self._start_frames: dict[str, list[Site]] = {}
        self._breaks: list[tuple[str, list[Site]]] = []
        self._orig_log_graph_break: Any = None
        self._callback: Any = None
        self._counter_base: dict[str, int] = {}
        self._use_counters = False
        self._metrics_ok = False

    # -- install / uninstall ---------------------------------------------------------------
    def start(self) -> None:
        try:
            import torch._dynamo.utils as du

            if hasattr(du, "set_compilation_metrics_limit"):
                du.set_compilation_metrics_limit(METRICS_LIMIT)
            for record in du.get_compilation_metrics():
                self._mark_seen(record)
            self._metrics_ok = True
        except (ImportError, AttributeError) as err:
            self.notes.append(
                f"compilations: not collected: torch._dynamo.utils.get_compilation_metrics "
                f"unavailable in this torch ({err})"
            )
        self._install_start_callback()
        self._install_graph_break_hook()

    def _install_start_callback(self) -> None:
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:
            self.notes.append(
                "compile sites: torch._dynamo.callback is unavailable; compile events carry the "
                "compiled function's location only"
            )
            return

        def on_start(*args: Any, **_kwargs: Any) -> None:
            compile_id = str(getattr(args[0], "compile_id", "")) if args else ""
            stack = traceback.extract_stack()[:-1]
            self._start_frames[compile_id] = frames_from_summary(stack)

        callback_handler.register_start_callback(on_start)
        self._callback = on_start

    def _install_graph_break_hook(self) -> None:
        try:
            import torch._dynamo.symbolic_convert as sc

            orig = sc.log_graph_break
        except (ImportError, AttributeError):
            orig = None
        if orig is None:
            self._use_counters = True
            self.notes.append(
                "graph breaks: symbolic_convert.log_graph_break is unavailable in this torch; "
                "reasons come from torch._dynamo counters, without source lines"
            )
            self._counter_base = self._graph_break_counters()
            return

        def log_graph_break(code_options: Any, reason: str = "", *args: Any, **kwargs: Any) -> Any:
            try:
                stack = kwargs.get("user_stack")
                if stack is None and len(args) >= 2:
                    stack = args[1]
                if stack is None:
                    import torch._guards

                    stack = torch._guards.TracingContext.extract_stack()
                frames = frames_from_summary(stack)
                if not frames and isinstance(code_options, dict):
                    frames = [Site(str(code_options.get("co_filename", "?")),
                                   int(code_options.get("co_firstlineno", 0) or 0),
                                   str(code_options.get("co_name", "")))]
                self._breaks.append((str(reason), frames))
            except Exception:  # noqa: BLE001 - never break the user's compile
                pass
            return orig(code_options, reason, *args, **kwargs)

        sc.log_graph_break = log_graph_break
        self._orig_log_graph_break = orig

    def stop(self) -> None:
        if self._orig_log_graph_break is not None:
            import torch._dynamo.symbolic_convert as sc

            sc.log_graph_break = self._orig_log_graph_break
            self._orig_log_graph_break = None
        if self._callback is not None:
            from torch._dynamo.callback import callback_handler

            try:
                callback_handler.remove_start_callback(self._callback)
            except (AttributeError, ValueError):
                pass
            self._callback = None

    # -- reading -----------------------------------------------------------------------------
    def _mark_seen(self, record: Any) -> None:
        self._seen.append(record)
        self._seen_ids.add(id(record))

    @staticmethod
    def _graph_break_counters() -> dict[str, int]:
        try:
            import torch._dynamo.utils as du

            return {str(k): int(v) for k, v in du.counters["graph_break"].items()}
        except (ImportError, AttributeError, KeyError):
            return {}

    def drain(self, step: int) -> Drained:
        """Events for everything dynamo did since the previous call, attributed to ``step``."""
        out = Drained()
        if self._metrics_ok:
            import torch._dynamo.utils as du

            for record in du.get_compilation_metrics():
                if id(record) in self._seen_ids:
                    continue
                self._mark_seen(record)
                data = compile_event_data(record)
                frames = self._start_frames.pop(data["compile_id"], [])
                site = user_site(frames)
                if site is None:
                    filename, _, line = data["code"].rpartition(":")
                    site = Site(filename, int(line) if line.isdigit() else 0, data["frame"])
                event = Event(kind="compile", step=step, seconds=compile_seconds(record),
                              site=site, frames=frames[:32], data=data)
                if is_frame_compile(record):
                    out.compiles.append(event)
                else:
                    event.kind = "compile_backward"
                    out.other.append(event)
        breaks, self._breaks = self._breaks, []
        for reason, frames in breaks:
            site = user_site(frames) or (frames[0] if frames else None)
            out.graph_breaks.append(Event(kind="graph_break", step=step, site=site,
                                          frames=frames[:32], data={"reason": reason}))
        if self._use_counters:
            now = self._graph_break_counters()
            for reason, n in now.items():
                for _ in range(n - self._counter_base.get(reason, 0)):
                    out.graph_breaks.append(Event(kind="graph_break", step=step,
                                                  data={"reason": reason}))
            self._counter_base = now
        return out
