"""MappedLog: the memory-mapped, append-only writer behind the run's record files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.store import STEP_DTYPE, MappedLog
from lazyscope.store.layout import STEPS_FILE
from lazyscope.store.reader import _lines, _records


def test_bytes_are_readable_before_close_and_padding_goes_at_close(tmp_path: Path) -> None:
    path = tmp_path / "intern.jsonl"
    log = MappedLog(path)
    lines = [(f'{{"i": {i}, "pad": "{"x" * 200}"}}\n').encode() for i in range(1000)]  # > 64 KiB
    for line in lines:
        log.append(line)
    raw = path.read_bytes()
    assert len(raw) > sum(map(len, lines)) and raw.endswith(b"\x00")  # mapped size, zero-padded
    warnings: list[str] = []
    assert len(_lines(path, warnings)) == 1000 and warnings == []
    log.close()
    assert log.closed
    assert path.read_bytes() == b"".join(lines)  # exact content once closed
    log.close()  # idempotent


def test_a_killed_writer_keeps_every_appended_record(tmp_path: Path) -> None:
    """SIGKILL right after the appends: no close, no flush; the page cache keeps them."""
    path = tmp_path / STEPS_FILE
    code = (
        "import os, signal\n"
        "from lazyscope.model import Meta\n"
        "from lazyscope.store import RunWriter\n"
        f"w = RunWriter({str(tmp_path)!r}, Meta(target='t'))\n"
        "for i in range(7):\n"
        "    w.write_step(i, {'wall_s': 0.5})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == -9
    warnings: list[str] = []
    records = _records(path, STEP_DTYPE, warnings, "kind")
    assert list(records["index"]) == list(range(7)) and warnings == []


def test_falls_back_to_plain_writes_when_the_map_cannot_grow(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "events.bin"
    log = MappedLog(path)
    log.append(b"a")

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    big = b"b" * (MappedLog.INITIAL + 10)
    log.append(big)  # needs to grow: fails, switches to write()
    log.append(b"c")
    log.close()
    assert path.read_bytes() == b"a" + big + b"c"


def test_appends_after_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "intern.jsonl"
    path.write_bytes(b"first\n")
    log = MappedLog(path)
    log.append(b"second\n")
    log.close()
    assert path.read_bytes() == b"first\nsecond\n"


@pytest.mark.parametrize("cut", [b'{"f": [1', b'{"s'])
def test_a_line_cut_before_the_padding_is_a_warning(tmp_path: Path, cut: bytes) -> None:
    path = tmp_path / "intern.jsonl"
    path.write_bytes(b'"a"\n' + cut + b"\x00" * 100)
    warnings: list[str] = []
    assert _lines(path, warnings) == [b'"a"']
    assert "cut off mid-write" in warnings[0]
