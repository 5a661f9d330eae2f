"""The HLO dump reader (backends/xla_hlo.py) on modules captured from torch_xla 2.9 on XLA:CPU
(``tests/programs/pitfalls/varying_seq_len.py`` at sequence lengths 17 and 33)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lazyscope.backends.xla.dump import dump_dir
from lazyscope.backends.xla.hlo import (
    HloDumpReader,
    HloModuleInfo,
    pair_modules,
    parse_entry_layout,
    parse_module,
)
from lazyscope.model import Compile
from tests.conftest import DATA

SEQ17 = (DATA / "xla_hlo" / "seq17.hlo.txt").read_text()
SEQ33 = (DATA / "xla_hlo" / "seq33.hlo.txt").read_text()


def test_inputs_in_parameter_order_with_dtypes_ops_and_donors() -> None:
    info = parse_module(SEQ17)
    assert info is not None
    assert info.num_params == 6
    assert info.inputs == [("f32", [32]), ("f32", [32, 32]), ("f32", [4, 17, 32]),
                           ("f32", []), ("f32", []), ("f32", [])]
    assert info.ops["dot"] >= 1 and info.ops["parameter"] >= 6 and "ROOT" not in info.ops
    assert info.donors == "(0, {}), (1, {})"
    assert info.name == "SyncTensorsGraph.69"


def test_digest_tells_graphs_apart_and_ignores_the_module_name() -> None:
    a, b = parse_module(SEQ17), parse_module(SEQ33)
    assert a is not None and b is not None
    assert a.digest != b.digest
    renamed = SEQ17.replace("SyncTensorsGraph.69", "SyncTensorsGraph.1234")
    donated = SEQ17.replace("buffer_donor={ (0, {}), (1, {}) }, ", "")
    assert parse_module(renamed).digest == a.digest  # type: ignore[union-attr]
    assert parse_module(donated).digest == a.digest  # type: ignore[union-attr]
    assert parse_module(donated).donors == ""  # type: ignore[union-attr]


def test_layout_with_wrapped_tuple_parameter_bounded_dims_and_other_types() -> None:
    header = ("HloModule m, entry_computation_layout={((f32[2,3]{1,0}, s64[<=8]{0}, pred[]), "
              "/*index=1*/bf16[4]{0:T(256)})->(f32[])}")
    assert parse_entry_layout(header) == (2, [("f32", [2, 3]), ("s64", [8]), ("pred", []),
                                              ("bf16", [4])])
    assert parse_entry_layout("HloModule m, is_scheduled=true") is None
    assert parse_module("not hlo at all") is None


def _info(number: int, params: int) -> HloModuleInfo:
    return HloModuleInfo(number=number, name="m", num_params=params)


def test_pairing_is_in_order_and_checked_on_the_input_count() -> None:
    a, b, c = _info(0, 3), _info(1, 5), _info(2, 3)
    assert pair_modules([3, 5, 3], [a, b, c]) == [a, b, c]
    # a module compiled without a compilation block (count 7) is skipped, not paired
    assert pair_modules([3, 5], [a, _info(1, 7), b]) == [a, b]
    # no module for the second compilation: None, never a wrong module
    assert pair_modules([3, 4], [a]) == [a, None]
    assert pair_modules([None], [b]) == [b]


def _dump(directory: Path, number: int, text: str, extra: bool = True) -> None:
    name = f"module_{number:04d}.SyncTensorsGraph.69"
    (directory / f"{name}.before_optimizations.txt").write_text(text)
    if extra:
        (directory / f"{name}.cpu_after_optimizations.txt").write_text("optimized")


def test_reader_takes_each_module_once_keeps_its_text_and_cleans_up(tmp_path: Path) -> None:
    dump, run = tmp_path / "dump", tmp_path / "run"
    dump.mkdir()
    run.mkdir()
    _dump(dump, 0, SEQ17)
    reader = HloDumpReader(str(dump), owned=True, keep_dir=run / "graphs", keep=1)
    reader.skip_existing()  # left by an earlier trace in this process
    assert reader.take_new() == []
    _dump(dump, 1, SEQ33)
    (first,) = reader.take_new()
    assert first.number == 1 and first.inputs[2] == ("f32", [4, 33, 32])
    assert reader.keep_text(first, "abc") == "graphs/abc.hlo.txt"
    assert (run / "graphs" / "abc.hlo.txt").read_text() == SEQ33
    _dump(dump, 2, SEQ17)
    (second,) = reader.take_new()
    assert reader.keep_text(second, "def") is None  # past keep=1
    reader.discard(second)
    assert reader.take_new() == []
    assert sorted(p.name for p in dump.iterdir()) == []  # owned: everything read is removed


def test_reader_leaves_a_users_dump_directory_alone(tmp_path: Path) -> None:
    dump = tmp_path / "mine"
    dump.mkdir()
    _dump(dump, 0, SEQ17)
    reader = HloDumpReader(str(dump), owned=False, keep_dir=tmp_path / "run" / "graphs")
    (info,) = reader.take_new()
    assert reader.keep_text(info, "h") == "graphs/h.hlo.txt"
    reader.discard(info)
    assert len(list(dump.iterdir())) == 2


@pytest.mark.parametrize(("flags", "expected"), [
    ("", None),
    ("--xla_cpu_enable_fast_math=false", None),
    ("--xla_dump_to=/tmp/d --xla_dump_hlo_as_text", "/tmp/d"),
    ("--xla_dump_to /tmp/e", "/tmp/e"),
    ("--xla_dump_to='/tmp/with space'", "/tmp/with space"),
])
def test_dump_dir_from_xla_flags(flags: str, expected: str | None) -> None:
    assert dump_dir(flags) == expected


def test_dump_goes_to_ram_backed_dir_only_when_it_has_room(tmp_path: Path, monkeypatch) -> None:
    import lazyscope.backends.xla.dump as xla

    monkeypatch.setattr(xla, "SHM_DIR", str(tmp_path))
    monkeypatch.setattr(xla, "SHM_MIN_FREE", 0)
    assert xla.fast_tmp() == str(tmp_path)
    monkeypatch.setattr(xla, "SHM_MIN_FREE", 1 << 60)  # more room than any disk has
    assert xla.fast_tmp() is None
    monkeypatch.setattr(xla, "SHM_DIR", str(tmp_path / "missing"))
    monkeypatch.setattr(xla, "SHM_MIN_FREE", 0)
    assert xla.fast_tmp() is None


def test_stale_dump_dirs_of_dead_processes_are_swept(tmp_path: Path) -> None:
    import subprocess
    import sys

    from lazyscope.backends.xla.dump import DUMP_PREFIX, sweep_stale_dump_dirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"{DUMP_PREFIX}{dead}-abc"
    alive = tmp_path / f"{DUMP_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{DUMP_PREFIX}notapid"
    for d in (stale, alive, other):
        d.mkdir()
    (stale / "module_0000.x.before_optimizations.txt").write_text("x")
    sweep_stale_dump_dirs(str(tmp_path))
    assert not stale.exists() and alive.exists() and other.exists()


def test_source_metadata_gives_input_origins_and_line_digests() -> None:
    """A module traced with IR debug on (torch_xla's `_set_ir_debug`): each data input names the
    line that moved it to the device, each user line gets a digest of its instructions, and the
    graph's digest is the same as without the metadata."""
    import re

    text = (DATA / "xla_hlo" / "with_source.hlo.txt").read_text()
    info = parse_module(text)
    assert info is not None
    # parameter 2 is x.to(dev) at line 5; the model's parameters come from torch's module.py
    assert info.origins[2] == ("/home/me/train.py", 5)
    assert "site-packages" in info.origins[0][0]
    lines = {(f, n) for f, n, _ in info.lines}
    assert ("/home/me/train.py", 6) in lines and ("/home/me/train.py", 7) in lines
    assert not any("site-packages" in f for f, _ in lines)  # library lines are not listed
    bare = parse_module(re.sub(r", metadata=\{[^{}]*\}", "", text))
    assert bare is not None and bare.digest == info.digest and bare.lines == []
    payload = Compile()
    info.fill(payload)
    assert payload.inputs[2].origin is not None and payload.inputs[2].origin.line == 5
    assert payload.inputs[0].origin is None  # a library line is no origin
    assert payload.lines and payload.constants is None or isinstance(payload.constants, list)
