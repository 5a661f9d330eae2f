"""A source file's syntax tree and the function that holds a line: what
:mod:`lazyscope.model.source_files` and :mod:`lazyscope.model.builders` both read programs with."""

from __future__ import annotations

import ast
from pathlib import Path


def parse_file(file: str) -> ast.Module | None:
    """The file's syntax tree, or None when it cannot be read or parsed."""
    try:
        return ast.parse(Path(file).read_text(encoding="utf-8"), file)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


def scope_at(tree: ast.Module, line: int) -> tuple[ast.AST, str]:
    """The innermost function holding ``line`` (else the module), and its name."""
    best: tuple[ast.AST, str] = (tree, "<module>")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                min([node.lineno, *(d.lineno for d in node.decorator_list)]) <= line <= (
                    node.end_lineno or node.lineno):  # its decorators are its lines too
            if best[0] is tree or node.lineno >= getattr(best[0], "lineno", 0):
                best = (node, node.name)
    return best
