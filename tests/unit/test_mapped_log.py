"""AppendLog: the append-only writer behind the run's record files (pwrite, never a memory
map: a file truncated under it costs records, never the program)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.store import STEP_DTYPE, AppendLog
from lazyscope.store.layout import STEPS_FILE
from lazyscope.store.reader import _lines, _records


def test_bytes_are_readable_before_close(tmp_path: Path) -> None:
    path = tmp_path / "intern.jsonl"
    log = AppendLog(path)
    lines = [(f'{{"i": {i}, "pad": "{"x" * 200}"}}\n').encode() for i in range(1000)]  # > 64 KiB
    for line in lines:
        log.append(line)
    assert path.read_bytes() == b"".join(lines)  # in the page cache at once
    warnings: list[str] = []
    assert len(_lines(path, warnings)) == 1000 and warnings == []
    log.close()
    assert log.closed
    assert path.read_bytes() == b"".join(lines)
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


def test_a_full_disk_is_an_error_at_the_record_that_did_not_fit(tmp_path: Path,
                                                               monkeypatch) -> None:
    path = tmp_path / "events.bin"
    log = AppendLog(path)
    log.append(b"a")
    real = os.pwrite

    def no_space(fd: int, data: bytes, offset: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", no_space)
    with pytest.raises(OSError) as err:
        log.append(b"b")
    assert err.value.errno == 28
    monkeypatch.setattr(os, "pwrite", real)
    log.append(b"c")
    log.close()
    assert path.read_bytes() == b"ac"


def test_a_file_truncated_by_another_process_costs_records_not_the_writer(
        tmp_path: Path) -> None:
    """A mapping of a truncated file kills its writer with SIGBUS at the next record; here the
    writer goes on (in a process of its own, so that a SIGBUS would show as its exit)."""
    path = tmp_path / STEPS_FILE
    code = (
        "import os\n"
        "from lazyscope.store import AppendLog\n"
        f"log = AppendLog({str(path)!r})\n"
        "for i in range(3000):\n"
        "    log.append(b'x' * 120)\n"
        "    if i == 1000:\n"
        f"        os.truncate({str(path)!r}, 0)\n"
        "log.close()\n"
        "print('alive')\n"
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0 and proc.stdout == "alive\n", (proc.returncode, proc.stderr)
    raw = path.read_bytes()
    assert len(raw) == 3000 * 120 and raw[-120:] == b"x" * 120  # the later records kept
    assert raw[:1001 * 120] == b"\0" * (1001 * 120)  # what the truncation took: a hole


def test_appends_after_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "intern.jsonl"
    path.write_bytes(b"first\n")
    log = AppendLog(path)
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


def test_a_finished_run_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """The end's check for a truncated file seeks the descriptor: it is still recognised as
    lazyscope's and closed (an open file keeps a read-only remount busy)."""
    from lazyscope.model import Meta
    from lazyscope.store import RunWriter

    before = set(os.listdir("/proc/self/fd"))
    writer = RunWriter(tmp_path / "r", Meta(target="t"))
    for i in range(3):
        writer.write_step(i, {"wall_s": 0.1})
    writer.finish("ok")
    opened = {fd for fd in set(os.listdir("/proc/self/fd")) - before
              if os.path.exists(f"/proc/self/fd/{fd}")}
    assert not opened, {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in opened}
