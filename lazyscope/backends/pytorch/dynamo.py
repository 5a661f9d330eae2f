"""Collect torch.compile (dynamo/inductor) compilations, graph breaks and recompile-limit
fallbacks from structured sources, into the run model.

Sources, all structured (no human log is parsed), each feature-detected so a newer or older
torch degrades to a recorded note instead of a crash:

* ``torch._dynamo.utils.get_compilation_metrics()``: one ``CompilationMetrics`` record per
  dynamo frame compilation (and per lazy backward compilation, ``is_forward=False``), with the
  compiled code's location, the duration, the failing guards (``recompile_reason``) and
  ``fail_type`` / ``fail_reason``. New records are taken when a compilation ends (dynamo's end
  callback) and at every barrier.
* ``torch._dynamo.callback.callback_handler`` start callbacks: the Python stack when a
  compilation starts, so a compilation is tied to the user's line that called the function.
* ``torch._dynamo.symbolic_convert.log_graph_break`` (wrapped for the trace; a function up to
  torch 2.9, a method of ``InstructionTranslatorBase`` from 2.10 on): the reason and the user's
  stack of each graph break.
* ``torch._dynamo.convert_frame.ConvertFrameAssert.__call__`` (wrapped for the trace): the frame
  dynamo is about to compile, and the ``__compiled_fn_*`` globals its compilation installs in the
  frame's module (the transformed bytecode loads them by name at every call: replaced for the
  trace by a counting wrapper, restored at the end), so every compiled variant's executions per
  step become ``execute`` events keyed by its compile id, as torch_xla's graphs are, and a
  variant compiled once and reused is told from variants made and thrown away. Also so each compilation records the dtypes and shapes of its tensor
  arguments and the values of its scalar ones (dynamo itself reports only the first failing
  guard of a recompile; comparing the arguments finds every change), which dimensions
  automatic dynamic shapes made dynamic (``torch._dynamo.pgo``'s code state), and the recompile
  limit when dynamo gives up on the function (``RecompileLimitExceeded``: from then on it runs
  eagerly).

The pure helpers (:func:`parse_guard_failures`, :func:`compile_payload`) take plain values and
are unit-tested without torch.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

from lazyscope.backends.base import Recorder
from lazyscope.model import Change, Compile, EagerFallback, GraphBreak, GraphInput, Stack
from lazyscope.model.ownership import bound_stack, capture_stack, frames_from_summary, make_frame

#: torch >= 2.10 logs a graph break dynamo cannot recover from (then skips the whole function)
#: with this in its reason
WHOLE_FUNCTION_SKIP = "Skipping the function and falling back to eager"
#: compilation records kept by torch; raised for the trace so a busy step loses none
METRICS_LIMIT = 4096

_SIZE_RE = re.compile(
    r"(?:tensor\s+)?'?(?P<tensor>[^'\s]+(?:\['[^']*'\])*)'?\s+(?P<what>size|stride) mismatch "
    r"at index (?P<index>-?\d+)\.\s+expected\s+(?P<expected>-?\d+),\s+actual\s+(?P<actual>-?\d+)")
_DTYPE_RE = re.compile(
    r"(?:tensor\s+)?'?(?P<tensor>[^'\s]+(?:\['[^']*'\])*)'?\s+dtype mismatch\. expected "
    r"(?P<expected>\S+), actual (?P<actual>\S+)")
_RANK_RE = re.compile(
    r"(?:tensor\s+)?'?(?P<tensor>[^'\s]+(?:\['[^']*'\])*)'?\s+rank mismatch\. expected "
    r"(?P<expected>-?\d+), actual (?P<actual>-?\d+)")
_VALUE_RE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\[\]'()]*?)(?:\)\.item\(\))?\s*==\s*"
                       r"(?P<value>[^\s,)]+)")
_PREFIX_RE = re.compile(r"^\s*(?P<cid>\d+/\d+):\s*")
_LOCAL_RE = re.compile(r"^L\['(?P<name>[^']+)'\]$")


def _name(expr: str) -> str:
    """``L['x']`` -> ``x`` (a guarded local's name); ``___stack0`` -> the value a graph break
    hands to the resumed graph; other sources as dynamo wrote them."""
    m = _LOCAL_RE.match(expr.strip())
    name = m["name"] if m else expr.strip()
    if name.startswith("___stack"):
        return "the value passed across the graph break"
    return name


def parse_guard_failures(reason: str | None) -> list[Change]:
    """Every failing guard of a dynamo recompile reason, as changes. Lines dynamo could not
    have produced from a size, dtype, rank or value guard become ``guard`` changes with the
    text. ``"0/0: tensor 'x' size mismatch at index 1. expected 64, actual 97"`` ->
    ``[Change("x", "dim", 1, 64, 97)]``."""
    if not reason:
        return []
    out: list[Change] = []
    for raw in reason.replace(";", "\n").splitlines():
        line = _PREFIX_RE.sub("", raw).strip()
        if not line:
            continue
        if (m := _SIZE_RE.search(line)) is not None:
            what = "dim" if m["what"] == "size" else "stride"
            out.append(Change(_name(m["tensor"]), what, int(m["index"]), int(m["expected"]),
                              int(m["actual"]), text=line))
        elif (m := _DTYPE_RE.search(line)) is not None:
            out.append(Change(_name(m["tensor"]), "dtype", None, m["expected"], m["actual"],
                              text=line))
        elif (m := _RANK_RE.search(line)) is not None:
            out.append(Change(_name(m["tensor"]), "rank", None, int(m["expected"]),
                              int(m["actual"]), text=line))
        elif (m := _VALUE_RE.search(line)) is not None:
            name = m["name"].removeprefix("___as_tensor(")
            out.append(Change(_name(name), "value", None, m["value"], None,
                              text=line.split("  #", 1)[0].strip()))
        else:
            out.append(Change("guard", "guard", None, None, None, text=line))
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


def function_of(record: Any) -> str:
    """``forward (/path/model.py:17)``: the compiled code."""
    name = _get(record, "co_name") or "?"
    return f"{name} ({_get(record, 'co_filename') or '?'}:{_get(record, 'co_firstlineno') or 0})"


def compile_payload(record: Any) -> Compile:
    """A ``compile`` event's payload from a ``CompilationMetrics`` record (or a dict)."""
    reason = _get(record, "recompile_reason")
    function = function_of(record)
    compile_id = str(_get(record, "compile_id") or "")
    if not is_frame_compile(record):
        return Compile(phase="backward", cause=f"backward compilation of {function}",
                       cause_kind="backward", function=function, forward_of=compile_id)
    if reason:
        changes = parse_guard_failures(reason)
        return Compile(phase="forward", cause=f"guard failed: {reason.strip()}",
                       cause_kind="recompile", function=function, changes=changes)
    return Compile(phase="forward", cause=f"first compilation of {function}", cause_kind="first",
                   function=function)


class DynamoCollector:
    """Installs the hooks for a trace and writes dynamo's events to the recorder as they
    happen; :meth:`drain` also returns the frame compilations and their seconds since the last
    call (a step's numbers)."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self.notes: list[str] = []
        self._seen: list[Any] = []  # references keep ids unique
        self._seen_ids: set[int] = set()
        self._start_frames: dict[str, Stack] = {}
        self._callbacks: list[tuple[str, Any]] = []
        self._orig_log_graph_break: Any = None
        self._metrics_ok = False
        self._count = 0
        self._seconds = 0.0
        #: (co_filename, co_firstlineno, co_name) -> (arguments, dynamic dims) of the frame
        #: dynamo was last asked to compile
        self._frames: dict[tuple[str, int, str], tuple[list[GraphInput], list[str]]] = {}
        self._orig_convert: Any = None
        #: functions that hit the recompile limit, with the stack of that call, until dynamo's
        #: record of the failed attempt arrives
        self._limit_pending: list[tuple[tuple[str, int, str], Stack]] = []
        #: the function dynamo is converting now and the stack of its call
        self._attempt: tuple[tuple[str, int, str], Stack] | None = None
        #: compile id -> the function its forward compiled and the stack that called it
        #: (backward records carry neither)
        self._functions: dict[str, tuple[str, Stack]] = {}
        self._forward_done: set[str] = set()
        #: code key -> compile id of its last forward compilation (pairs the globals a
        #: compilation installed with its id)
        self._last_forward: dict[tuple[str, int, str], str] = {}
        #: compile id -> calls of its compiled graph since the last drain
        self._calls: dict[str, int] = {}
        #: (module globals, name, dynamo's function, our wrapper): restored at stop
        self._wrapped: list[tuple[dict[str, Any], str, Any, Any]] = []
        self._can_count = False

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
                f"unavailable in this torch ({err})")
        self._install_callbacks()
        self._install_graph_break_hook()
        self._can_count = _skip_counting_code()
        if not self._can_count:
            self.notes.append("executions: torch._dynamo.eval_frame.skip_code is unavailable; "
                              "how often each compiled graph ran is not recorded")
        self._install_frame_hook()

    def _install_frame_hook(self) -> None:
        try:
            from torch._dynamo.convert_frame import ConvertFrameAssert
        except ImportError:
            self.notes.append("compile arguments: torch._dynamo.convert_frame.ConvertFrameAssert "
                              "is unavailable; recompiles carry dynamo's first failing guard only")
            return
        orig = ConvertFrameAssert.__call__
        collector = self

        def __call__(self_: Any, frame: Any, cache_entry: Any, hooks: Any, frame_state: Any,
                     *args: Any, **kwargs: Any) -> Any:
            key = None
            before: set[str] | None = None
            try:
                code = frame.f_code
                key = (code.co_filename, code.co_firstlineno, code.co_name)
                inputs = frame_arguments(frame.f_locals)
                before = compiled_globals(frame.f_globals)
                # the call site, should this attempt hit the recompile limit without raising
                collector._attempt = (key, capture_stack(1))
            except Exception:  # noqa: BLE001 - never break the user's compile
                inputs = []
            try:
                return orig(self_, frame, cache_entry, hooks, frame_state, *args, **kwargs)
            except Exception as err:
                if key is not None and (type(err).__name__ in LIMIT_ERRORS
                                        or "cache limit exceeded" in str(err).lower()):
                    collector._limit_hit(key, err)
                raise
            finally:
                if key is not None:
                    collector._frames[key] = (inputs, dynamic_dims(frame.f_code))
                    # dynamo appended this call's record before returning (its end callback
                    # runs earlier, one record behind): take it now, paired with these
                    # arguments, before another call of the same function replaces them
                    try:
                        collector._take_metrics()
                        if before is not None:
                            collector._count_calls(frame.f_globals, before, key)
                    except Exception:  # noqa: BLE001 - never break the user's compile
                        pass
                    collector._frames.pop(key, None)

        ConvertFrameAssert.__call__ = __call__
        self._orig_convert = (ConvertFrameAssert, orig)

    def _count_calls(self, module: dict[str, Any], before: set[str],
                     key: tuple[str, int, str]) -> None:
        """Wrap the graphs this compilation of ``key`` installed in its module's globals so
        their calls are counted under its compile id."""
        compile_id = self._last_forward.pop(key, None)
        if compile_id is None or not self._can_count:
            return
        for name in compiled_globals(module) - before:
            fn = module[name]
            counted = _counting(fn, compile_id, self._calls)
            module[name] = counted
            self._wrapped.append((module, name, fn, counted))

    def executions(self) -> dict[str, int]:
        """Calls of each compiled graph (by compile id) since the last call."""
        out = dict(self._calls)
        self._calls.clear()  # in place: the wrappers hold this dict
        return out

    def _limit_hit(self, key: tuple[str, int, str], err: BaseException) -> None:
        """Dynamo gave up compiling a function (it runs eagerly from this call on); the event
        is written when dynamo's record of the attempt, with the last reason, arrives."""
        if not any(k == key for k, _ in self._limit_pending):
            self._limit_pending.append((key, capture_stack(1)))

    def _install_callbacks(self) -> None:
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:
            self.notes.append("compile sites: torch._dynamo.callback is unavailable; compile "
                              "events carry the compiled function's location only")
            return

        def on_start(*args: Any, **_kwargs: Any) -> None:
            # dynamo starts a compile id twice: the frame's forward, then (lazily, at the first
            # backward) AOTAutograd's backward: the forward's stack is the one to keep
            compile_id = str(getattr(args[0], "compile_id", "")) if args else ""
            if compile_id in self._forward_done or compile_id in self._start_frames:
                return
            self._start_frames[compile_id] = bound_stack(
                frames_from_summary(traceback.extract_stack()[:-1]))

        def on_end(*_args: Any, **_kwargs: Any) -> None:
            self._take_metrics()

        callback_handler.register_start_callback(on_start)
        self._callbacks.append(("start", on_start))
        if hasattr(callback_handler, "register_end_callback"):
            callback_handler.register_end_callback(on_end)
            self._callbacks.append(("end", on_end))

    def _install_graph_break_hook(self) -> None:
        try:
            import torch._dynamo.symbolic_convert as sc
        except ImportError:
            sc = None
        if sc is not None and callable(getattr(sc, "log_graph_break", None)):
            self._hook_break_function(sc)
        elif sc is not None and callable(
                getattr(getattr(sc, "InstructionTranslatorBase", None), "log_graph_break", None)):
            self._hook_break_method(sc.InstructionTranslatorBase)
        else:
            self.notes.append("graph breaks: torch._dynamo.symbolic_convert has no "
                              "log_graph_break in this torch; graph breaks are not collected")

    def _hook_break_function(self, sc: Any) -> None:
        """torch <= 2.9: ``log_graph_break(code_options, reason, exc_info, user_stack)``."""
        orig = sc.log_graph_break

        def log_graph_break(code_options: Any, reason: str = "", *args: Any, **kwargs: Any) -> Any:
            try:
                stack = kwargs.get("user_stack")
                if stack is None and len(args) >= 2:
                    stack = args[1]
                self._record_break(code_options, str(reason), stack)
            except Exception:  # noqa: BLE001 - never break the user's compile
                pass
            return orig(code_options, reason, *args, **kwargs)

        sc.log_graph_break = log_graph_break
        self._orig_log_graph_break = (sc, "log_graph_break", orig)

    def _hook_break_method(self, cls: Any) -> None:
        """torch >= 2.10: ``InstructionTranslatorBase.log_graph_break(self, code_options,
        reason, exc)``, once per exception (``exc.logged``); the stack is ``exc.real_stack``."""
        orig = cls.__dict__["log_graph_break"]

        def log_graph_break(tx: Any, code_options: Any, reason: str = "", exc: Any = None,
                            *args: Any, **kwargs: Any) -> Any:
            try:
                # a break dynamo cannot split around skips the whole function: that attempt
                # compiles nothing and is recorded from its metrics (runs eagerly at every call)
                if not getattr(exc, "logged", False) and WHOLE_FUNCTION_SKIP not in str(reason):
                    self._record_break(code_options, str(reason),
                                       getattr(exc, "real_stack", None))
            except Exception:  # noqa: BLE001 - never break the user's compile
                pass
            return orig(tx, code_options, reason, exc, *args, **kwargs)

        cls.log_graph_break = log_graph_break
        self._orig_log_graph_break = (cls, "log_graph_break", orig)

    def _record_break(self, code_options: Any, reason: str, stack: Any) -> None:
        if stack is None:
            import torch._guards

            stack = torch._guards.TracingContext.extract_stack()
        frames = frames_from_summary(stack)
        function = ""
        if isinstance(code_options, dict):
            function = (f"{code_options.get('co_name', '?')} "
                        f"({code_options.get('co_filename', '?')}:"
                        f"{code_options.get('co_firstlineno', 0)})")
            if not frames:
                frames = [make_frame(str(code_options.get("co_filename", "?")),
                                     int(code_options.get("co_firstlineno", 0) or 0),
                                     str(code_options.get("co_name", "")))]
        reason_text, hints = split_hints(reason)
        self.recorder.event("graph_break", stack=bound_stack(frames),
                            payload=GraphBreak(reason=reason_text, hints=hints,
                                               function=function))

    def stop(self) -> None:
        self._take_metrics()
        for module, name, fn, counted in self._wrapped:
            if module.get(name) is counted:
                module[name] = fn
        self._wrapped = []
        if self._orig_convert is not None:
            cls, orig = self._orig_convert
            cls.__call__ = orig
            self._orig_convert = None
        if self._orig_log_graph_break is not None:
            owner, name, orig = self._orig_log_graph_break
            setattr(owner, name, orig)
            self._orig_log_graph_break = None
        if self._callbacks:
            from torch._dynamo.callback import callback_handler

            for which, fn in self._callbacks:
                try:
                    getattr(callback_handler, f"remove_{which}_callback")(fn)
                except (AttributeError, ValueError):
                    pass
            self._callbacks = []

    # -- reading -----------------------------------------------------------------------------
    def _mark_seen(self, record: Any) -> None:
        self._seen.append(record)
        self._seen_ids.add(id(record))

    def _take_metrics(self) -> None:
        if not self._metrics_ok:
            return
        import torch._dynamo.utils as du

        for record in du.get_compilation_metrics():
            if id(record) in self._seen_ids:
                continue
            self._mark_seen(record)
            self._take(record)

    def _take(self, record: Any) -> None:
        key = str(_get(record, "compile_id") or "")
        fail = str(_get(record, "fail_type") or "")
        if fail and (_get(record, "is_forward") is None or not _get(record, "has_guarded_code")):
            # an attempt that compiled nothing: the recompile limit, or dynamo giving up
            stack = self._start_frames.pop(key, ())
            if "RecompileLimit" in fail or "limit" in str(_get(record, "fail_reason")).lower():
                self._eager_fallback(record, stack)
            elif _get(record, "is_forward") is not None:
                self._whole_function(record, stack)
            return
        if _get(record, "is_forward") and _get(record, "graph_op_count") is None and \
                _get(record, "guard_count") is None:
            # dynamo skipped the frame (a graph break inside a loop, or nothing to compile):
            # no graph; the break itself was logged where it happened
            self._start_frames.pop(key, None)
            return
        payload = compile_payload(record)
        seconds = compile_seconds(record)
        if payload.phase == "forward":
            stack = self._start_frames.pop(key, ())
            self._forward_done.add(key)
            self._functions[key] = (payload.function, stack)
            code = (str(_get(record, "co_filename") or ""),
                    int(_get(record, "co_firstlineno") or 0), str(_get(record, "co_name") or ""))
            inputs, dynamic = self._frames.pop(code, ([], []))
            self._last_forward[code] = key
            payload.inputs = inputs or None
            payload.dynamic = dynamic or None
            self._count += 1
        else:  # AOTAutograd's lazy backward compile: belongs to its forward
            payload.function, stack = self._functions.get(key, (payload.function, ()))
            payload.cause = f"backward compilation of {payload.function}"
            key = f"{key} backward"
        self._seconds += seconds
        self.recorder.event("compile", seconds=seconds, stack=stack, payload=payload, key=key)

    def _whole_function(self, record: Any, stack: Stack) -> None:
        """Dynamo could not trace a function at all (e.g. a break under a user context
        manager) and runs it eagerly at every call; dynamo logs no graph break for it."""
        reason_text, hints = split_hints(str(_get(record, "fail_reason") or ""))
        file = _get(record, "fail_user_frame_filename")
        line = _get(record, "fail_user_frame_lineno")
        frames = list(stack)
        if file and line:
            frames.insert(0, make_frame(str(file), int(line), ""))
        self.recorder.event("graph_break", stack=bound_stack(frames), payload=GraphBreak(
            reason=reason_text, hints=hints, kind=WHOLE_FUNCTION, function=function_of(record)))

    def _eager_fallback(self, record: Any, started: Stack = ()) -> None:
        """The recompile limit: the call site from dynamo's exception (torch <= 2.9 raises it
        through the frame hook), else the attempt's start callback's or the frame hook's (later
        torch returns instead of raising)."""
        reason = str(_get(record, "recompile_reason") or "")
        if self._limit_pending:
            key, stack = self._limit_pending.pop(0)
        elif not started and self._attempt is not None:
            key, stack = self._attempt
        else:
            key, stack = None, started
        function = (f"{key[2]} ({key[0]}:{key[1]})" if key else
                    function_of(record) if _get(record, "co_name") else "a compiled function")
        try:
            import torch._dynamo.config as dconfig

            limit = getattr(dconfig, "recompile_limit", None)
            if limit is None:
                limit = getattr(dconfig, "cache_size_limit", None)
        except ImportError:
            limit = None
        self.recorder.event("eager_fallback", stack=stack, payload=EagerFallback(
            function=function, limit=limit if isinstance(limit, int) else None,
            last_reason=reason or str(_get(record, "fail_reason") or "")))

    def drain(self) -> tuple[int, float]:
        """Frame compilations and compile seconds since the last call."""
        self._take_metrics()
        count, seconds = self._count, self._seconds
        self._count, self._seconds = 0, 0.0
        return count, seconds


#: a graph break's kind when dynamo gave up on the whole function (it runs eagerly)
WHOLE_FUNCTION = "whole function"
#: what dynamo raises when a function hits the recompile limit (torch 2.9: convert_frame.py)
LIMIT_ERRORS = ("RecompileLimitExceeded", "FailOnRecompileLimitHit", "CacheLimitExceeded")
#: arguments of a compiled frame worth recording: at most this many
MAX_ARGUMENTS = 64


def _counting(fn: Any, compile_id: str, calls: dict[str, int]) -> Any:
    """``fn`` counting its calls in ``calls[compile_id]``. Dynamo must not trace the wrapper
    (it runs where dynamo's frame callback is set): its code is marked skipped, as dynamo's own
    ``disable`` wrapper is, and it carries the disabled function's markers."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[compile_id] = calls.get(compile_id, 0) + 1
        return fn(*args, **kwargs)

    for attr in ("_torchdynamo_disable", "_torchdynamo_disable_msg", "_torchdynamo_orig_callable"):
        if hasattr(fn, attr):
            setattr(counted, attr, getattr(fn, attr))
    return counted


def _skip_counting_code() -> bool:
    """Mark :func:`_counting`'s wrapper code as one dynamo never compiles; False when this
    torch has no way to (then no graph is wrapped)."""
    try:
        from torch._dynamo.eval_frame import skip_code
    except ImportError:
        return False
    skip_code(_counting(None, "", {}).__code__)
    return True


def compiled_globals(module: dict[str, Any]) -> set[str]:
    """The names of the graphs dynamo installed in a module's globals (``__compiled_fn_*``,
    torch 2.x ``OutputGraph.compile_and_call_fx_graph``)."""
    return {name for name in module if name.startswith("__compiled_fn")}


def frame_arguments(f_locals: dict[str, Any]) -> list[GraphInput]:
    """The tensors (dtype, shape) and Python scalars (value) among a frame's locals at the time
    dynamo compiles it: its arguments, since it has not run yet. Tensors inside a list, tuple or
    dict argument are named ``arg[i]`` / ``arg['k']``."""
    import torch

    out: list[GraphInput] = []

    def add(name: str, value: Any) -> None:
        if len(out) >= MAX_ARGUMENTS:
            return
        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            try:
                shape = [int(d) for d in value.shape]
            except (TypeError, RuntimeError):  # nested / symbolic shapes
                shape = []
            out.append(GraphInput(dtype, shape, name=name))
        elif isinstance(value, (bool, int, float)):
            out.append(GraphInput(type(value).__name__, [], name=name, value=value))

    for name, value in f_locals.items():
        if name == "self" or name.startswith("__"):
            continue
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value[:8]):
                if isinstance(item, torch.Tensor):
                    add(f"{name}[{i}]", item)
        elif isinstance(value, dict):
            for k, item in list(value.items())[:8]:
                if isinstance(item, torch.Tensor):
                    add(f"{name}[{k!r}]", item)
        else:
            add(name, value)
    return out


def dynamic_dims(code: Any) -> list[str]:
    """``["x dim 1", "n"]``: what automatic dynamic shapes has made dynamic for a compiled code
    object (torch 2.9 keeps it in ``torch._dynamo.pgo.get_code_state()[CodeId]``:
    ``FrameStateSizeEntry.size`` / ``.scalar`` holding ``auto_dynamic``)."""
    try:
        from torch._dynamo import pgo

        state = pgo.get_code_state().get(pgo.CodeId.make(code))
        auto_dynamic = pgo.auto_dynamic
    except Exception:  # noqa: BLE001 - another torch: no dynamic dims reported
        return []
    if state is None:
        return []
    out = []
    for name, entry in state.automatic_dynamic.items():
        label = _name(str(name))
        size = getattr(entry, "size", None)
        if isinstance(size, tuple):
            out += [f"{label} dim {d}" for d, s in enumerate(size) if s is auto_dynamic]
        elif getattr(entry, "scalar", None) is auto_dynamic:
            out.append(label)
    return out


def split_hints(reason: str) -> tuple[str, list[str]]:
    """Dynamo's graph-break text -> (the reason, its ``Hint:`` lines)."""
    hints = []
    kept = []
    for line in reason.splitlines():
        stripped = line.strip()
        if stripped.lower().startswith("hint:"):
            hints.append(stripped[5:].strip())
        elif stripped:
            kept.append(stripped)
    return " ".join(kept), hints
