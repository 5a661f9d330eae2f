"""Every sentence of every backend renders, and each backend speaks its own words."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest

from lazyscope.analyze.wording import BASE, TABLES, say, table

XLA_TERMS = re.compile(r"torch_xla|\bXLA\b|xm\.|add_step_closure|mark_step|HLO|"
                       r"device-to-host|XLA_|PT_XLA|--no-graph-shapes|StepTrace")


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("backend", [*TABLES, "a-backend-nobody-wrote"])
def test_every_key_of_every_backend_renders(backend: str) -> None:
    words = table(backend)
    assert set(words) == set(BASE)  # every key, whatever the backend
    for key, template in words.items():
        values = dict.fromkeys(_fields(template), 7)
        text = say(backend, key, **values)
        assert "{" not in text and "}" not in text, (backend, key, text)


@pytest.mark.parametrize("backend", [b for b in TABLES if b != "xla"])
def test_no_xla_word_reaches_another_backend(backend: str) -> None:
    for key, text in TABLES[backend].items():
        assert not XLA_TERMS.search(text), (backend, key, text)
    for key, text in BASE.items():
        assert not XLA_TERMS.search(text), ("base", key, text)


def test_backends_say_their_own_fix() -> None:
    assert "xm.add_step_closure" in say("xla", "sync_fix_value")
    assert "xm." not in say("compile", "sync_fix_value")
    assert say("xla", "fix_dims", dims="dim 1 of x") != say("compile", "fix_dims", dims="dim 1 of x")


def test_no_string_says_a_count_with_a_bracketed_plural() -> None:
    """Counts and nouns agree ('1 graph', '3 graphs': lazyscope.core.units.counted/times), never
    'graph(s)': every string literal of the package and the scenarios is checked."""
    repo = Path(__file__).resolve().parents[2]
    found = []
    for path in [*(repo / "lazyscope").rglob("*.py"), *(repo / "scenarios").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.search(r"[a-z]\(s\)", node.value):
                found.append(f"{path.relative_to(repo)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, found
