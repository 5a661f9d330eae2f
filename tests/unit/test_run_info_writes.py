"""lazyscope writes its run info through the typed :class:`RunInfo`: every name a collector, the
runner or an integration writes is one of RunInfo's fields, with a value of its declared type
(``info_fields``), so what is written is what :func:`run_info` reads back. The source is read
for every write (the way ``test_layout`` reads imports), so a new bare string key fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lazyscope.model.info import RunInfo, info_fields, run_info

PACKAGE = Path(__file__).resolve().parents[2] / "lazyscope"
#: where a bare ``set_info`` stays: the public API's, for the program's own values
PUBLIC_SET_INFO = {PACKAGE / "__init__.py", PACKAGE / "backends" / "base.py"}


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == name)
                    or (isinstance(node.func, ast.Name) and node.func.id == name)):
                out.append((path, node))
    return out


def test_every_run_info_write_names_a_field() -> None:
    fields = set(RunInfo.__dataclass_fields__)
    calls = _calls("set_run_info") + _calls("info_fields")
    assert len(calls) >= 15  # the collectors', the runner's, the Trainer callback's
    for path, call in calls:
        for kw in call.keywords:
            if kw.arg is None:  # **mapping: only in the two helpers that forward theirs
                assert path.name in ("base.py", "runner.py"), f"{path}:{call.lineno}"
                continue
            assert kw.arg in fields, f"{path}:{call.lineno}: {kw.arg!r} is not a RunInfo field"


def test_no_bare_set_info_outside_the_public_api() -> None:
    bare = [f"{p.relative_to(PACKAGE)}:{c.lineno}" for p, c in _calls("set_info")
            if p not in PUBLIC_SET_INFO]
    assert bare == []


def test_a_name_or_value_run_info_would_not_read_is_refused() -> None:
    with pytest.raises(TypeError, match="'torch_devices' is not a field of RunInfo"):
        info_fields(torch_devices="cuda:0")
    with pytest.raises(TypeError, match="'devices'.*declared type"):
        info_fields(devices="8")
    with pytest.raises(TypeError, match="'user' is not a field"):  # the program's, not ours
        info_fields(user={"a": 1})


def test_what_is_written_reads_back_as_the_field() -> None:
    written = info_fields(torch_device="cuda:0", compile_dynamic="auto", devices=8,
                          torchax_steps={"mode": "jit", "function": "step", "calls": {"step": 3}},
                          trainer={"max_steps": 10}, graph_shapes=False, ranks=[0, 1])
    info = run_info(written)
    assert (info.torch_device, info.compile_dynamic, info.devices) == ("cuda:0", "auto", 8)
    assert info.torchax_steps == {"mode": "jit", "function": "step", "calls": {"step": 3}}
    assert info.trainer == {"max_steps": 10} and info.graph_shapes is False
    assert info.ranks == [0, 1] and info.user == {}
