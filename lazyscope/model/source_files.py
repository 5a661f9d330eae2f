"""What only the user's source says, read from the files a run's frames name.

:data:`SOURCES` (a :class:`SourceFiles`) answers five questions the analysis asks through the
:class:`~lazyscope.analyze.findings.SourceLookup` protocol; each answer is a
:class:`~lazyscope.model.Frame` or None (the file cannot be read, the line is not in it, no
single answer).

:func:`value_origin` answers "where is the value used at this line set?" for a value XLA baked
into a graph (a special scalar: a learning rate that reaches 0.0 enters the graph at
``p.sub_(lr * p.grad)``; the line to change is ``lr = ...``). It reads the line's function (or
module) with :mod:`ast`, takes the names the line reads, and returns the latest assignment
before the line of the one assigned a *number-like* expression (arithmetic of constants, names
and calls such as ``max``, ``min``, ``float``, ``math.cos``): a ``for p in model.parameters()``
or a tensor made by ``torch.*`` is not a Python number. None when the file cannot be read, the
line is not in it, or no such assignment exists: the report then keeps the line where the value
enters the graph.

The analysis itself does no I/O: the command line and the public API pass this function to
:func:`lazyscope.analyze.report.build_report`.
"""

from __future__ import annotations

import ast
import functools

from lazyscope.model import Frame
from lazyscope.model.builders import built_at as _built_at
from lazyscope.model.pyast import parse_file as _tree
from lazyscope.model.pyast import scope_at as _scope

#: calls whose result is a Python number when their arguments are
_NUMERIC_CALLS = frozenset({"max", "min", "abs", "float", "int", "round", "pow", "sum", "len"})
_NUMERIC_MODULES = frozenset({"math"})


@functools.lru_cache(maxsize=64)
def _numeric(node: ast.AST) -> bool:
    """An expression that computes a Python number from numbers, names and numeric calls."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.IfExp):
        return _numeric(node.body) and _numeric(node.orelse)
    if isinstance(node, ast.Call):
        fn = node.func
        named = (isinstance(fn, ast.Name) and fn.id in _NUMERIC_CALLS) or (
            isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name)
            and fn.value.id in _NUMERIC_MODULES)
        return named and all(_numeric(a) for a in node.args)
    return False


def _at_line(file: str, line: int) -> tuple[ast.Module, ast.AST, str, set[str]] | None:
    """``(the file's tree, the function holding the line (or the module), its name, the names
    the line reads)``, or None when the file cannot be parsed."""
    tree = _tree(file)
    if tree is None:
        return None
    scope, function = _scope(tree, line)
    read = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and getattr(n, "lineno", 0) == line}
    return tree, scope, function, read


def value_origin(file: str, line: int) -> Frame | None:
    """Where a number used at ``file:line`` is set (see the module docstring), or None."""
    found = _at_line(file, line)
    if found is None:
        return None
    _, scope, function, used = found
    if not used:
        return None
    latest: dict[str, tuple[int, bool]] = {}
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and \
                node.lineno < line and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in used and \
                        node.lineno > latest.get(target.id, (0, False))[0]:
                    latest[target.id] = (node.lineno, _numeric(node.value))
        elif isinstance(node, ast.For) and node.lineno < line:
            for bound in ast.walk(node.target):
                if isinstance(bound, ast.Name) and bound.id in used and \
                        node.lineno > latest.get(bound.id, (0, False))[0]:
                    latest[bound.id] = (node.lineno, False)
    numeric = [lineno for lineno, is_number in latest.values() if is_number]
    if len(numeric) != 1:  # none, or several numbers: not one answer
        lr = _lr_set_before(scope, line)
        if lr is not None and lr != line:  # an optimizer's step reads the lr it was given
            return value_origin(file, lr) or Frame(file, lr, function)
        return None
    return Frame(file, numeric[0], function)


def _lr_set_before(scope: ast.AST, line: int) -> int | None:
    """For a line that calls an optimizer's ``step()``: the latest line before it, in the same
    function, that sets a learning rate (``group["lr"] = lr``, ``opt.lr = lr``), else None."""
    calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call) and _callee(n) == "step"
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not calls:
        return None
    best = 0
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and node.lineno < line:
            for t in node.targets:
                key = t.slice if isinstance(t, ast.Subscript) else None
                if (isinstance(key, ast.Constant) and key.value == "lr") or (
                        isinstance(t, ast.Attribute) and t.attr == "lr"):
                    best = max(best, node.lineno)
    return best or None


def _attr_path(name: str) -> tuple[str, ...]:
    """``self.step`` -> (``self``, ``step``); ``G['SCALE']`` -> (``SCALE``,)."""
    name = name.replace("L['", "").replace("G['", "").replace("']", "")
    return tuple(p for p in name.split(".") if p)


def assignment_before(file: str, line: int, name: str) -> Frame | None:
    """The nearest assignment before ``file:line``, in the function holding it, to the attribute
    or global ``name`` ends with (``model.step = i`` for a guard on ``self.step``)."""
    tree = _tree(file)
    path = _attr_path(name)
    if tree is None or not path:
        return None
    scope, function = _scope(tree, line)
    attr = path[-1]
    best = 0
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.lineno < line:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                hit = ((isinstance(target, ast.Attribute) and target.attr == attr) or
                       (len(path) == 1 and isinstance(target, ast.Name) and target.id == attr))
                if hit:
                    best = max(best, node.lineno)
    return Frame(file, best, function) if best else None


def read_in(file: str, def_line: int, name: str) -> Frame | None:
    """The first line of the function defined at ``file:def_line`` that reads ``name`` (an
    attribute such as ``self.step``, or a global)."""
    tree = _tree(file)
    path = _attr_path(name)
    if tree is None or not path:
        return None
    for node in ast.walk(tree):
        # a decorated function's code starts at its first decorator (@torch.compile)
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) \
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else 0
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                start <= def_line <= (node.body[0].lineno if node.body else node.lineno):
            reads = sorted(
                n.lineno for n in ast.walk(node)
                if (isinstance(n, ast.Attribute) and n.attr == path[-1] and len(path) > 1
                    and isinstance(n.ctx, ast.Load))
                or (len(path) == 1 and isinstance(n, ast.Name) and n.id == path[0]
                    and isinstance(n.ctx, ast.Load)))
            return Frame(file, reads[0], node.name) if reads else None
    return None


def argument_origins(file: str, line: int, callee: str) -> list[Frame]:
    """Where the arguments of the call to ``callee`` at ``file:line`` are made: for each
    positional argument that is a name, its nearest assignment before the line (``score(tokens)``
    -> ``tokens = pad_sequence(...).to(dev)``)."""
    tree = _tree(file)
    if tree is None:
        return []
    scope, function = _scope(tree, line)
    names: list[str] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or line):
            fn = node.func
            called = fn.id if isinstance(fn, ast.Name) else (
                fn.attr if isinstance(fn, ast.Attribute) else "")
            if called == callee:
                names = [a.id for a in node.args if isinstance(a, ast.Name)]
    out = []
    for name in names:
        found = assignment_before(file, line, name)
        if found is not None:
            out.append(found)
    return out


def _transfers(node: ast.AST) -> bool:
    """An expression that moves a tensor to a device: ``.to(...)``, ``.cuda()``, or a tensor
    factory given ``device=``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            fn = n.func
            if isinstance(fn, ast.Attribute) and fn.attr in ("to", "cuda", "xla"):
                return True
            if any(k.arg == "device" for k in n.keywords):
                return True
    return False


#: calls whose output's size depends on the data (a host read decides it)
_DATA_SIZE_CALLS = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive",
                              "argwhere", "bincount"})


def data_size_maker(file: str, line: int) -> str:
    """What at ``file:line`` makes a size from the data: ``nonzero``, ``masked_select``, ...,
    or ``mask indexing`` for ``x[mask]`` with a comparison or a name that a comparison made;
    "" when nothing does (or the file cannot be read)."""
    found = _at_line(file, line)
    if found is None:
        return ""
    _, scope, _, _ = found
    stmts = [n for n in ast.walk(scope) if isinstance(n, ast.stmt)
             and n.lineno <= line <= (n.end_lineno or n.lineno)
             and not isinstance(n, (ast.For, ast.While, ast.With, ast.If, ast.FunctionDef,
                                    ast.AsyncFunctionDef, ast.ClassDef, ast.Try))]
    masks = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Compare) for t in n.targets if isinstance(t, ast.Name)}
    for stmt in stmts:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and _callee(n) in _DATA_SIZE_CALLS:
                return _callee(n)
            if isinstance(n, ast.Subscript) and (
                    isinstance(n.slice, ast.Compare)
                    or (isinstance(n.slice, ast.Name) and n.slice.id in masks)):
                return "mask indexing"
    return ""


def transfer_origin(file: str, line: int) -> Frame | None:
    """Where a tensor read at ``file:line`` was moved to the device, when that line is not such
    a line itself: the nearest assignment before it, of a name it reads, whose value moves a
    tensor to the device (``tokens = pad_sequence(...).to(dev)`` for a use of ``tokens``); None
    when there is not exactly one."""
    tree = _tree(file)
    if tree is None:
        return None
    scope, function = _scope(tree, line)
    at_line = [n for n in ast.walk(scope) if isinstance(n, ast.stmt)
               and n.lineno <= line <= (n.end_lineno or n.lineno)
               and not isinstance(n, (ast.For, ast.While, ast.With, ast.If, ast.FunctionDef,
                                      ast.AsyncFunctionDef, ast.ClassDef, ast.Try))]
    if not at_line or any(_transfers(n) for n in at_line) or data_size_maker(file, line):
        return None  # the line moves it to the device, or makes its size from the data
    used = {n.id for stmt in at_line for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    # a name the line assigns too is carried from the line's own last run (history =
    # torch.cat((history, x))): the line itself makes it
    used -= {n.id for stmt in at_line for n in ast.walk(stmt)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found: dict[str, tuple[int, bool]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and node.lineno < line:
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in used and \
                        node.lineno > found.get(target.id, (0, False))[0]:
                    found[target.id] = (node.lineno, _transfers(node.value))
    lines = [lineno for lineno, moves in found.values() if moves]
    if len(lines) > 1:
        # a module moved once before the loop and the batch moved in it every step: the one
        # made in the loop that holds the line
        loops = [n for n in ast.walk(scope) if isinstance(n, (ast.For, ast.While))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
        if loops:
            inner = max(loops, key=lambda n: n.lineno)
            lines = [n for n in lines if inner.lineno < n <= (inner.end_lineno or n)]
    return Frame(file, lines[0], function) if len(lines) == 1 else None


#: calls that end a step on XLA (a barrier), by the called name: ``torch_xla.sync()``,
#: ``xm.mark_step()``, ``xp.StepTrace(...)``, and a parallel loader (it marks a step per batch)
_BARRIER_CALLS = frozenset({"sync", "mark_step", "StepTrace"})
_LOADER_CALLS = frozenset({"MpDeviceLoader", "ParallelLoader", "per_device_loader"})


def _ends_step(call: ast.Call, functions: set[str]) -> bool:
    """A call that ends a step: a barrier, ``torch_xla.step()``, ``xm.optimizer_step(...,
    barrier=True)``, ``lazyscope.barrier()``, a parallel loader, or one of ``functions`` (the
    file's own functions that end one)."""
    name = _callee(call)
    fn = call.func
    owner = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) \
        else ""
    if name in _BARRIER_CALLS or name in _LOADER_CALLS or name in functions:
        return True
    if name == "step" and owner == "torch_xla" or name == "barrier" and owner == "lazyscope":
        return True
    return name == "optimizer_step" and any(
        k.arg == "barrier" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords)


def _barrier_functions(tree: ast.Module) -> set[str]:
    """The names of the file's functions that end a step (call a barrier, or such a function
    of the file), to a fixed point."""
    defs = {n.name: n for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: set[str] = set()
    while True:
        more = {name for name, fn in defs.items() if name not in found and any(
            isinstance(c, ast.Call) and _ends_step(c, found) for c in ast.walk(fn))}
        if not more:
            return found
        found |= more


def _loader_names(tree: ast.Module) -> set[str]:
    """Names assigned a torch_xla parallel loader (``loader = pl.MpDeviceLoader(...)``)."""
    return {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and _callee(n.value) in _LOADER_CALLS
            for t in n.targets if isinstance(t, ast.Name)}


def loop_without_barrier(file: str, lines: list[int], read_line: int) -> Frame | None:
    """The outermost ``for`` / ``while`` loop of ``file`` that holds any of ``lines`` and not
    ``read_line``, when nothing in it ends a step: no call of a barrier (``torch_xla.sync()``,
    ``xm.mark_step()``, ``torch_xla.step()``, ``xp.StepTrace``, ``xm.optimizer_step``) or of a
    function of the file that calls one, and no iteration over a parallel loader
    (``MpDeviceLoader``); None otherwise (or when the file cannot be read)."""
    tree = _tree(file)
    if tree is None or not lines:
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))
             and any(n.lineno <= ln <= (n.end_lineno or n.lineno) for ln in lines)]
    if not loops:
        return None
    outer = min(loops, key=lambda n: n.lineno - (n.end_lineno or n.lineno))
    if outer.lineno <= read_line <= (outer.end_lineno or outer.lineno):
        return None
    functions = _barrier_functions(tree)
    if any(isinstance(c, ast.Call) and _ends_step(c, functions) for c in ast.walk(outer)):
        return None
    loaders = _loader_names(tree)
    for loop in ast.walk(outer):
        if isinstance(loop, (ast.For, ast.AsyncFor)) and any(
                (isinstance(x, ast.Call) and _callee(x) in _LOADER_CALLS)
                or (isinstance(x, ast.Name) and x.id in loaders) for x in ast.walk(loop.iter)):
            return None
    scope, function = _scope(tree, outer.lineno)
    return Frame(file, outer.lineno, function)


class SourceFiles:
    """The user's source files, read on demand and parsed once each (see the module
    docstring); the analysis' :class:`~lazyscope.analyze.findings.SourceLookup`."""

    def value_origin(self, file: str, line: int) -> Frame | None:
        return value_origin(file, line)

    def assignment_before(self, file: str, line: int, name: str) -> Frame | None:
        return assignment_before(file, line, name)

    def read_in(self, file: str, def_line: int, name: str) -> Frame | None:
        return read_in(file, def_line, name)

    def argument_origins(self, file: str, line: int, callee: str) -> list[Frame]:
        return argument_origins(file, line, callee)

    def transfer_origin(self, file: str, line: int) -> Frame | None:
        return transfer_origin(file, line)

    def call_line(self, files: list[str], names: list[str], keyword: str = "") -> Frame | None:
        return call_line(files, names, keyword)

    def growth_origin(self, file: str, line: int) -> Frame | None:
        return growth_origin(file, line)

    def built_at(self, files: list[str], made: Frame | None, names: list[str]) -> Frame | None:
        return _built_at(files, made, names)

    def size_origin(self, file: str, line: int) -> tuple[Frame, Frame] | None:
        return size_origin(file, line)

    def loop_without_barrier(self, file: str, lines: list[int], read_line: int
                             ) -> Frame | None:
        return loop_without_barrier(file, lines, read_line)

    def data_size_maker(self, file: str, line: int) -> str:
        return data_size_maker(file, line)

    def function_of(self, file: str, line: int) -> str:
        return function_of(file, line)


def function_of(file: str, line: int) -> str:
    """The name of the innermost function holding ``file:line`` (``<module>`` outside any), ""
    when the file cannot be read."""
    tree = _tree(file)
    return _scope(tree, line)[1] if tree is not None else ""


SOURCES = SourceFiles()


#: calls whose output size comes from a Python number argument
_SIZE_CALLS = frozenset({"interpolate", "upsample", "randperm", "arange", "zeros", "ones",
                         "empty", "full", "rand", "randn", "randint", "linspace", "repeat",
                         "expand", "view", "reshape", "new_zeros", "new_ones", "new_full",
                         "narrow", "tile", "pad"})
#: how far above the first changed line the call that made the size is looked for
_SIZE_LOOKBACK = 8


def size_origin(file: str, line: int) -> tuple[Frame, Frame] | None:
    """``(the call that makes a size, where its number is set)``: a call, at ``file:line`` or
    assigned (a few lines above, in the same function) to a name that line reads, of a
    size-making function (``F.interpolate(x, scale_factor=s)``, ``torch.randperm(n)``,
    ``torch.arange(n)`` ...) with a Python number set in the function (:func:`value_origin`);
    None when there is none."""
    found = _at_line(file, line)
    if found is None:
        return None
    _, scope, function, read = found
    candidates: set[int] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and _callee(node) in _SIZE_CALLS and node.lineno == line:
            candidates.add(line)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                _callee(node.value) in _SIZE_CALLS and \
                line - _SIZE_LOOKBACK <= node.lineno < line and \
                {t.id for t in node.targets if isinstance(t, ast.Name)} & read:
            candidates.add(node.lineno)
    for at in sorted(candidates, reverse=True):
        set_at = value_origin(file, at)
        if set_at is not None and set_at.line != at:
            return Frame(file, at, function), set_at
    return None


#: calls that make a tensor larger than one of their arguments
_GROWING_CALLS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack",
                            "dstack", "column_stack", "row_stack", "append"})


def growth_origin(file: str, line: int) -> Frame | None:
    """Where a tensor read at ``file:line`` grows: in the line's function (or module), the one
    assignment ``name = torch.cat((name, ...))`` (or stack, hstack, append ...) to a name the line
    reads, the name itself among the call's arguments. When the line reads a parameter of its
    function, the function's calls in the same file are followed (``smoothed(history)``, and
    ``history = torch.cat((history, ...))`` beside it). None when there is no single one."""
    at = _at_line(file, line)
    if at is None:
        return None
    tree, scope, function, read = at
    found = _growing_assignments(scope, read)
    if not found and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        params = [a.arg for a in scope.args.args]
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and _callee(call) == scope.name):
                continue
            passed = {a.id for i, a in enumerate(call.args)
                      if isinstance(a, ast.Name) and i < len(params) and params[i] in read}
            outer, _ = _scope(tree, call.lineno)
            found |= {(ln, _scope(tree, ln)[1]) for ln, _ in _growing_assignments(outer, passed)}
    if len(found) == 1:
        where, fn = found.pop()
        return Frame(file, where, fn)
    return None


def _growing_assignments(scope: ast.AST, names: set[str]) -> set[tuple[int, str]]:
    """(line, function) of each ``name = cat((name, ...))`` in ``scope`` to one of ``names``."""
    out: set[tuple[int, str]] = set()
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and _callee(node.value) in _GROWING_CALLS):
            continue
        targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
        grows = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & targets
        if grows & names:
            out.add((node.lineno, getattr(scope, "name", "<module>")))
    return out


def _callee(node: ast.Call) -> str:
    fn = node.func
    if isinstance(fn, ast.Name):
        return fn.id
    if isinstance(fn, ast.Attribute):
        return fn.attr
    return ""


def call_line(files: list[str], names: list[str], keyword: str = "") -> Frame | None:
    """The user's line that builds a library object: the one call, in ``files``, of a function
    or class named in ``names`` (``DataCollatorWithPadding(...)``); else the one keyword
    argument ``keyword=`` (``data_collator=...``) of any call; None when there is no single
    answer."""
    found: set[tuple[str, int]] = set()
    kw: set[tuple[str, int]] = set()
    wanted = set(names)
    for file in dict.fromkeys(files):
        tree = _tree(file)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if _callee(node) in wanted:
                found.add((file, node.lineno))
            for k in node.keywords:
                if keyword and k.arg == keyword:
                    kw.add((file, k.value.lineno))
    for hits in (found, kw):
        if len(hits) == 1:
            file, line = next(iter(hits))
            return Frame(file, line)
    return None
