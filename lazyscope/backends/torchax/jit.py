"""The program's jitted functions: which user function each is, its calls, its inputs.

While a trace is active ``jax.jit`` (the attribute: what a program's ``jax.jit(f)``,
``@jax.jit``, ``from jax import jit`` after the trace began, and torchax's ``interop.jax_jit``,
``JittableModule`` and ``torchax.compile``, which call it at call time, all reach) returns a
:class:`Jitted`: JAX's own jitted function behind a thin wrapper that

* knows the user's function (:func:`describe`): for torchax's ``jax.jit(partial(call_torch,
  f))`` that is ``f``, for a ``JittableModule`` the module's method, with its parameter names
  (JAX calls them ``args[i]``) and its ``def`` line;
* counts its calls made outside any JAX trace (a jitted function called while another is
  traced is inlined there: not a call of its own), and tells the collector at the end of each
  (:meth:`JitWatch.call`);
* says, for a call, which compiled program it ran: the *graph id* is the function's label and
  a hash of its arguments' structure, shapes, dtypes, weak types and static values (what JAX's
  own cache is keyed on), computed when the call compiles, and for a call that compiled nothing
  only when the function object has more than one program (else it ran that one: a steady
  step pays nothing for it);
* names each input of a compiled program in the user's words (:func:`graph_inputs`).

Everything else is JAX's: ``.lower``, ``.trace``, ``.eval_shape`` and the other attributes are
the wrapped function's. ``jax.jit`` is restored when the trace stops; a :class:`Jitted` made
during the trace keeps working after it (it calls straight through). jax is imported lazily
(in :meth:`JitWatch.install`).
"""

from __future__ import annotations

import functools
import inspect
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lazyscope.backends.torchax.explain import user_path
from lazyscope.model import GraphInput, Stack
from lazyscope.model.ownership import capture_stack, is_library_file

#: a jitted function whose direct caller of jax.jit is in one of these is the user's (torchax's
#: own helpers jit what the user gives them)
USER_JIT_HELPERS = ("torchax.interop", "torchax", "torchax.train")


@dataclass
class JitInfo:
    """What a jitted function is, in the user's terms."""

    #: ``name (file:line)``: the user's function and its ``def`` line; the same for every jit
    #: object made of one function (a ``jax_jit(f)`` inside a loop)
    label: str
    name: str
    #: positional parameter names, and the ``*args`` name, of the user's function
    names: list[str]
    varargs: str = ""
    static_nums: frozenset[int] = frozenset()
    static_names: frozenset[str] = frozenset()
    #: the user's code asked for it (directly or through torchax), not a library for itself
    user: bool = True
    #: where jax.jit was called
    created: Stack = ()
    #: JAX's name of the function (its compiled module is ``jit(NAME)``)
    jax_name: str = ""
    #: signature hash -> graph id, for this jit object
    graphs: dict[int, str] = field(default_factory=dict)


def _positional(fn: Any) -> tuple[list[str], str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], ""
    names, varargs = [], ""
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            varargs = p.name
    return names, varargs


def _where(fn: Any) -> tuple[str, str]:
    """``(qualified name, file:line)`` of a function's definition, as far as it says."""
    target = inspect.unwrap(fn) if callable(fn) else fn
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or type(target).__name__
    if code is None:
        call = type(target).__dict__.get("__call__")
        code = getattr(call, "__code__", None)
    return str(name), (f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "")


def describe(fun: Any) -> tuple[str, str, list[str], str]:
    """``(label, name, positional names, varargs name)`` of the user's function behind what
    was given to ``jax.jit``: through ``functools.partial`` (its bound arguments dropped),
    torchax's ``call_torch`` (the torch function) and a ``JittableModule``'s
    ``functional_call`` (``params``, ``buffers``, then the method's own parameters)."""
    bound = 0
    fn = fun
    while isinstance(fn, functools.partial):
        if getattr(fn.func, "__name__", "") == "call_torch" and fn.args:
            fn, bound = fn.args[0], len(fn.args) - 1
            continue
        bound += len(fn.args)
        fn = fn.func
    method = getattr(fn, "__func__", None)
    owner = getattr(fn, "__self__", None)
    if getattr(method, "__name__", "") == "functional_call" and hasattr(owner, "_model"):
        # JittableModule.functional_call(method_or_name, params, buffers, *args): the partial
        # bound the method's name
        model = owner._model
        method_name = "forward"
        if isinstance(fun, functools.partial):
            inner = fun
            while isinstance(inner, functools.partial):
                if inner.func is fn and inner.args:
                    method_name = inner.args[0] if isinstance(inner.args[0], str) else "forward"
                    break
                inner = inner.args[0] if getattr(inner.func, "__name__", "") == "call_torch" \
                    and inner.args else inner.func
        target = getattr(model, method_name, None)
        names, varargs = _positional(target) if target is not None else ([], "")
        _, at = _where(target) if target is not None else ("", "")
        name = f"{type(model).__name__}.{method_name}"
        return (f"{name} ({at})" if at else name), name, ["params", "buffers", *names], varargs
    names, varargs = _positional(fn)
    name, at = _where(fn)
    return (f"{name} ({at})" if at else name), name, names[bound:], varargs


def jax_name(fun: Any) -> str:
    """The name JAX gives a function (its ``__name__``, through partials), as its compile
    events and modules say it."""
    while True:
        name = getattr(fun, "__name__", None)
        if name is not None:
            return str(name)
        if not isinstance(fun, functools.partial):
            return "<unnamed function>"
        fun = fun.func


def _static(kwargs: dict[str, Any]) -> tuple[frozenset[int], frozenset[str]]:
    nums = kwargs.get("static_argnums") or ()
    names = kwargs.get("static_argnames") or ()
    nums = (nums,) if isinstance(nums, int) else tuple(nums)
    names = (names,) if isinstance(names, str) else tuple(names)
    return frozenset(int(n) for n in nums), frozenset(str(n) for n in names)


def _jax_value(leaf: Any) -> Any:
    """The JAX array behind a leaf (a torchax tensor's ``_elem``), else the leaf."""
    return getattr(leaf, "_elem", leaf)


def _leaf_sig(leaf: Any, static: bool) -> Any:
    a = getattr(leaf, "_elem", leaf)
    dtype = getattr(a, "dtype", None)
    if dtype is not None:
        # the dtype object itself: str() of a numpy dtype costs microseconds a leaf
        return (a.shape, dtype, getattr(a, "weak_type", False))
    if static:
        try:
            hash(leaf)
            return (type(leaf).__name__, leaf)
        except TypeError:
            return (type(leaf).__name__, id(leaf))
    return type(leaf).__name__


class Jitted:
    """A jitted function watched by the trace (see the module docstring)."""

    def __init__(self, watch: JitWatch, inner: Any, info: JitInfo):
        self._lazyscope_watch = watch
        self._lazyscope_inner = inner
        self._lazyscope_info = info
        functools.update_wrapper(self, inner, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._lazyscope_watch.call(self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lazyscope_inner, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """``@jax.jit`` on a method: bound like a function."""
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return repr(self._lazyscope_inner)


class JitWatch:
    """Installs the ``jax.jit`` wrapper and keeps the call state of each thread.

    ``on_call(info, graph, compiled)`` is called after each call made outside a JAX trace, in
    the calling thread, with the graph id the call ran and whether it compiled; it may raise
    (the step limit), which ends the program's call like any exception of the function."""

    def __init__(self, on_call: Callable[[JitInfo, str, bool], None]):
        self.on_call = on_call
        self._local = threading.local()
        self._jax: Any = None
        self._core: Any = None
        self._original: Any = None
        self.active = False
        #: every jitted function made during the trace, by label: the same function jitted
        #: again is the same callable for step counting
        self.labels: dict[str, list[JitInfo]] = {}
        #: graph ids compiled so far by label and signature (shared by the jit objects of one
        #: function: a jax_jit(f) made again compiles a graph it had)
        self.known: dict[tuple[str, int], str] = {}

    # -- state of the calling thread -----------------------------------------------------
    @property
    def current(self) -> tuple[Jitted, tuple[Any, ...], dict[str, Any]] | None:
        """The outermost jitted call in progress in this thread, with its arguments."""
        return getattr(self._local, "call", None)

    def install(self) -> None:
        import jax

        if self._original is not None:
            return
        from jax._src import core

        self._jax = jax
        self._core = core
        self._original = original = jax.jit
        self.active = True
        watch = self

        @functools.wraps(original)
        def jit(fun: Any = None, *args: Any, **kwargs: Any) -> Any:
            inner = original(fun, *args, **kwargs)
            if not watch.active or fun is None or not callable(inner) or args:
                return inner  # jax.jit(static_argnums=...) used as a decorator factory
            return watch.wrap(inner, fun, kwargs)

        jax.jit = jit

    def uninstall(self) -> None:
        self.active = False
        if self._original is not None and self._jax is not None:
            if getattr(self._jax.jit, "__wrapped__", None) is self._original:
                self._jax.jit = self._original
            self._original = None

    def wrap(self, inner: Any, fun: Any, kwargs: dict[str, Any]) -> Any:
        try:
            label, name, names, varargs = describe(fun)
        except Exception:  # noqa: BLE001 - a callable inspect cannot read: JAX's own names
            label, name, names, varargs = (getattr(fun, "__qualname__", repr(fun)), "", [], "")
        nums, static_names = _static(kwargs)
        stack = capture_stack(2)
        info = JitInfo(label, name or label, names, varargs, nums, static_names,
                       user=self._user_made(), created=stack, jax_name=jax_name(fun))
        self.labels.setdefault(label, []).append(info)
        return Jitted(self, inner, info)

    @staticmethod
    def _user_made() -> bool:
        """Whether the code that called ``jax.jit`` is the user's or torchax's helpers (not a
        library jitting something for itself)."""
        import sys

        f: Any = sys._getframe(3)
        while f is not None:
            module = str(f.f_globals.get("__name__", ""))
            if module.partition(".")[0] in ("jax", "lazyscope"):
                f = f.f_back
                continue
            return module in USER_JIT_HELPERS or not is_library_file(f.f_code.co_filename)
        return False

    # -- calls -----------------------------------------------------------------------------
    def call(self, jitted: Jitted, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        inner = jitted._lazyscope_inner
        local = self._local
        if not self.active or getattr(local, "call", None) is not None or self._tracing():
            return inner(*args, **kwargs)
        info = jitted._lazyscope_info
        local.call = (jitted, args, kwargs)
        local.compiled = None
        try:
            out = inner(*args, **kwargs)
        finally:
            local.call = None
        graph: str | None = local.compiled
        if graph is None:
            if len(info.graphs) == 1:
                # one program compiled for this function object, and this call compiled
                # nothing: it ran that one (no need to look at the arguments)
                graph = next(iter(info.graphs.values()))
            else:
                # which of its programs ran: from the arguments' signature (after the call:
                # a donated argument is deleted, its shape and dtype are still there)
                try:
                    graph = self.graph_id(info, self.signature(info, args, kwargs))
                except Exception:  # noqa: BLE001 - arguments lazyscope cannot read
                    graph = f"{info.name}#?"
        local.last_out = out
        self.on_call(info, graph, local.compiled is not None)
        return out

    def note_compile(self, graph: str) -> None:
        """``graph`` was compiled in this thread's jitted call in progress."""
        self._local.compiled = graph

    def last_outputs(self) -> Any:
        """The outputs of this thread's last jitted call (what a barrier waits for)."""
        return getattr(self._local, "last_out", None)

    def _tracing(self) -> bool:
        """A JAX trace is in progress in this thread (the call is inlined into it)."""
        core = self._core
        try:
            return not isinstance(core.trace_ctx.trace, core.EvalTrace)
        except Exception:  # noqa: BLE001 - another jax: count the call
            return False

    def signature(self, info: JitInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        """A hash of what JAX's cache keys a call on (see the module docstring)."""
        tree = self._jax.tree_util
        parts: list[Any] = []
        for i, a in enumerate(args):
            static = i in info.static_nums
            leaves, treedef = tree.tree_flatten(a)
            parts.append((treedef, tuple(_leaf_sig(x, static) for x in leaves)))
        for k in sorted(kwargs):
            static = k in info.static_names
            leaves, treedef = tree.tree_flatten(kwargs[k])
            parts.append((k, treedef, tuple(_leaf_sig(x, static) for x in leaves)))
        return hash(tuple(parts))

    def graph_id(self, info: JitInfo, key: int) -> str:
        graph = info.graphs.get(key)
        if graph is None:
            graph = self.known.get((info.label, key))
            if graph is None:
                short = info.name.rpartition(".")[2] or info.name
                graph = self.known[(info.label, key)] = f"{short}#{len(self.known) + 1}"
            info.graphs[key] = graph
        return graph

    def graph_inputs(self, info: JitInfo, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> list[GraphInput]:
        """Each input of the call, named in the user's words (``batch['input_ids']``,
        ``params['fc1.weight']``, a static ``scale`` with its value)."""
        tree = self._jax.tree_util
        out: list[GraphInput] = []
        for top, container in ((0, args), (1, kwargs)):
            flat, _ = tree.tree_flatten_with_path(container)
            for path, leaf in flat:
                jax_path = (f"[{top}]" + tree.keystr(path))
                name = user_path(jax_path, info.names, info.varargs)
                first = path[0] if path else None
                index = getattr(first, "idx", None)
                key = getattr(first, "key", None)
                static = (top == 0 and index in info.static_nums) or \
                    (top == 1 and key in info.static_names)
                out.append(_graph_input(leaf, name, static))
        return out


def _graph_input(leaf: Any, name: str, static: bool) -> GraphInput:
    a = _jax_value(leaf)
    shape = getattr(a, "shape", None)
    if shape is not None and hasattr(a, "dtype"):
        weak = " (weak)" if getattr(a, "weak_type", False) else ""
        return GraphInput(f"{a.dtype}{weak}", [int(d) for d in shape], name)
    value = leaf if isinstance(leaf, (bool, int, float, str)) else repr(leaf)[:80]
    if static:
        return GraphInput("static", [], name, value=value)
    # a Python number passed as a traced argument: JAX makes it a weakly typed scalar
    return GraphInput(f"python {type(leaf).__name__}", [], name)
