"""MappedLog: the memory-mapped, append-only writer behind steps.jsonl and events.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.model import MappedLog, _read_jsonl


def test_lines_are_readable_before_close_and_padding_goes_at_close(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    log = MappedLog(path)
    lines = [json.dumps({"step": i, "pad": "x" * 200}) + "\n" for i in range(1000)]  # > 64 KiB
    for line in lines:
        log.append(line)
    raw = path.read_bytes()
    assert len(raw) > sum(map(len, lines)) and raw.endswith(b"\x00")  # mapped size, NUL-padded
    warnings: list[str] = []
    assert [obj["step"] for _, obj in _read_jsonl(path, warnings)] == list(range(1000))
    assert warnings == []
    log.close()
    assert log.closed
    assert path.read_text() == "".join(lines)  # exact content once closed
    log.close()  # idempotent


def test_a_killed_writer_keeps_every_appended_line(tmp_path: Path) -> None:
    """SIGKILL right after the appends: no close, no flush; the page cache keeps the lines."""
    path = tmp_path / "steps.jsonl"
    code = (
        "import os, signal, sys\n"
        "from lazyscope.model import MappedLog\n"
        f"log = MappedLog({str(path)!r})\n"
        "for i in range(7):\n"
        "    log.append('{\"step\": %d}\\n' % i)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == -9
    warnings: list[str] = []
    assert [obj["step"] for _, obj in _read_jsonl(path, warnings)] == list(range(7))


def test_falls_back_to_plain_writes_when_the_map_cannot_grow(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "events.jsonl"
    log = MappedLog(path)
    log.append("a\n")

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    big = "b" * (MappedLog.INITIAL + 10) + "\n"
    log.append(big)  # needs to grow: fails, switches to write()
    log.append("c\n")
    log.close()
    assert path.read_text() == "a\n" + big + "c\n"


def test_appends_after_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text("first\n")
    log = MappedLog(path)
    log.append("second\n")
    log.close()
    assert path.read_text() == "first\nsecond\n"


@pytest.mark.parametrize("cut", [b'{"step": 3', b'{"st'])
def test_a_line_cut_before_the_padding_is_a_warning(tmp_path: Path, cut: bytes) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b'{"step": 0}\n' + cut + b"\x00" * 100)
    warnings: list[str] = []
    assert [obj["step"] for _, obj in _read_jsonl(path, warnings)] == [0]
    assert "cut off mid-write" in warnings[0]
