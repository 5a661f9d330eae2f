"""Where the user built a library object a loader calls: the collator a ``DataLoader`` got as
``collate_fn=`` or a Hugging Face ``Trainer`` as ``data_collator=``, read from the user's source
with :mod:`ast` (the run recorded the object's class and the line that made the loader, never
the line that built the object).

:func:`built_at` starts at the call that hands the object over: the call spanning the line
that made the loader when it has such a keyword (``DataLoader(ds, collate_fn=data_collator)``),
else the one call in the user's files with it (``Trainer(..., data_collator=data_collator)``,
when the loader is made inside ``trainer.train()``). It follows the keyword's value:

* a call is the line that built it (``data_collator=DataCollatorWithPadding(tokenizer)``); of
  ``X(...) if flag else y``, the branch that calls the object's class;
* a name is followed to its assignments before the call, in the function (or module) holding
  it: the latest one that calls the object's class (``data_collator =
  DataCollatorForLanguageModeling(...)``, though a later line rebinds the name to something
  built from it), else the latest one, followed again when it is a name itself (a few hops);
* anything else (an attribute, a parameter of the function) is not followed: None.

None too when the files cannot be parsed or the answer is not one line. Reads files; no other
I/O.
"""

from __future__ import annotations

import ast

from lazyscope.model import Frame
from lazyscope.model.pyast import parse_file as _tree
from lazyscope.model.pyast import scope_at as _scope

#: the keywords a loader's maker takes its collate function by
KEYWORDS = ("collate_fn", "data_collator")
#: name -> name hops followed at most
MAX_HOPS = 4


def _callee(node: ast.AST) -> str:
    fn = node.func if isinstance(node, ast.Call) else None
    if isinstance(fn, ast.Name):
        return fn.id
    if isinstance(fn, ast.Attribute):
        return fn.attr
    return ""


def _handovers(tree: ast.Module, line: int | None) -> list[ast.Call]:
    """Calls with a collate keyword; only those spanning ``line`` when it is given."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(k.arg in KEYWORDS for k in node.keywords) and (
                line is None or node.lineno <= line <= (node.end_lineno or node.lineno)):
            out.append(node)
    return out


def _assignments(scope: ast.AST, name: str, before: int) -> list[ast.Assign | ast.AnnAssign]:
    found = []
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and \
                node.lineno < before:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(node)
    return sorted(found, key=lambda n: n.lineno)


def _calls_class(value: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and _callee(n) in names for n in ast.walk(value)
               if not isinstance(n, ast.Lambda))


def _follow(tree: ast.Module, value: ast.AST, at: int, names: set[str]) -> int | None:
    """The line that built the object ``value`` (an expression at line ``at``) stands for."""
    for _ in range(MAX_HOPS):
        if isinstance(value, ast.IfExp):  # `X(...) if flag else other`: the branch that builds
            branches = [b for b in (value.body, value.orelse) if _calls_class(b, names)]
            if len(branches) != 1:
                return None
            value = branches[0]
        if isinstance(value, ast.Call):
            return value.lineno
        if not isinstance(value, ast.Name):
            return None
        scope, _ = _scope(tree, at)
        assigned = _assignments(scope, value.id, at)
        if not assigned:
            return None
        building = [a for a in assigned if a.value is not None and _calls_class(a.value, names)]
        chosen = (building or assigned)[-1]
        if building or isinstance(chosen.value, ast.Call):
            return chosen.lineno
        assert chosen.value is not None
        value, at = chosen.value, chosen.lineno
    return None


def built_at(files: list[str], made: Frame | None, names: list[str]) -> Frame | None:
    """The user's line that built the collate function a loader calls (see the module
    docstring): ``files`` the user's files the run's frames name, ``made`` the user's line that
    made the loader, ``names`` the object's class names."""
    wanted = set(names)
    answers: set[tuple[str, int]] = set()
    made_tree = _tree(made.file) if made is not None else None
    if made is not None and made_tree is not None:
        for call in _handovers(made_tree, made.line):
            for k in call.keywords:
                if k.arg in KEYWORDS:
                    found = _follow(made_tree, k.value, call.lineno, wanted)
                    if found is not None:
                        answers.add((made.file, found))
        if answers:
            return _one(answers)
    for file in dict.fromkeys(files):
        tree = _tree(file)
        if tree is None:
            continue
        for call in _handovers(tree, None):
            for k in call.keywords:
                if k.arg in KEYWORDS:
                    found = _follow(tree, k.value, call.lineno, wanted)
                    if found is not None:
                        answers.add((file, found))
    return _one(answers)


def built_name(file: str, line: int) -> str | None:
    """The name the object built at ``file:line`` is given there (``data_collator =
    DataCollatorForLanguageModeling(`` -> ``data_collator``; a ``def`` -> its name), None when
    the line binds no single name (a collator built inside a call)."""
    tree = _tree(file)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return node.name
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno == line:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            return names[0] if len(names) == 1 else None
    return None


def collator_source(collate: dict[str, object], files: list[str]) -> dict[str, object]:
    """A loader's collate description (:func:`lazyscope.analyze.makers.data_task`) with what
    the user's source says of it: ``built_at`` (``[file, line]``: a function's ``def``, else
    where the object was built, :func:`built_at`) and ``variable`` (the name the program gives
    it there, :func:`built_name`)."""
    out = dict(collate)
    if not collate.get("object") and not collate.get("library", True) and collate.get("file"):
        line = collate.get("line")
        found: Frame | None = Frame(str(collate["file"]), int(line) if isinstance(line, int)
                                    else 0)
    else:
        at = collate.get("loader_at")
        made = Frame(str(at[0]), int(at[1])) if isinstance(at, list) and len(at) == 2 else None
        short = str(collate.get("name") or "").split(".")[-1]
        found = built_at([*([made.file] if made else []), *files], made, [short])
    if found is not None and found.line:
        out["built_at"] = [found.file, found.line]
        name = built_name(found.file, found.line)
        if name:
            out["variable"] = name
    return out


def _one(answers: set[tuple[str, int]]) -> Frame | None:
    if len(answers) != 1:
        return None
    file, line = next(iter(answers))
    return Frame(file, line)
