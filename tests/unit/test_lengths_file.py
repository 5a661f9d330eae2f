"""A lengths file is streamed with bounds: chunk boundaries anywhere, standard input, a FIFO, a
limit said in a note, a line that is no length refused with its number (pure: files only)."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from lazyscope.core import padding
from lazyscope.core.padding import read_lengths


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 22])
def test_every_chunk_boundary_reads_the_same_lengths(tmp_path: Path, monkeypatch,
                                                     chunk: int) -> None:
    rng = random.Random(chunk)
    values = [rng.choice([1, 9, 10, 99, 4096, padding.MAX_LENGTH]) for _ in range(500)]
    lines = []
    for v in values:
        lines.append(f"  {v} " if rng.random() < 0.2 else str(v))
        if rng.random() < 0.1:
            lines.append("")  # blank lines are skipped
    f = tmp_path / "l.txt"
    f.write_text("\n".join(lines) + ("\n" if chunk % 2 else ""))  # with and without a last \n
    monkeypatch.setattr(padding, "_CHUNK_BYTES", chunk)
    assert read_lengths(f).tolist() == values


def test_the_limit_is_said_and_bad_lines_are_named(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(i) for i in range(1, 101)) + "\n")
    notes: list[str] = []
    assert read_lengths(f, limit=10, notes=notes).tolist() == list(range(1, 11))
    assert notes == [f"read the first 10 lengths of {f}; the rest were not read"]
    notes.clear()
    assert len(read_lengths(f, limit=100, notes=notes)) == 100 and not notes
    monkeypatch.setattr(padding, "_CHUNK_BYTES", 5)
    for text, message in (("3\n4\nx\n", "line 3: 'x' is not a whole number"),
                          ("3\n\n0\n", "line 3: '0' is out of range: from 1 to 1,048,576"),
                          ("3\n" + "9" * 80 + "\n", "line 2 is longer than 64 bytes"),
                          ("\n\n", "holds no lengths")):
        f.write_text(text)
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            read_lengths(f)


def test_a_fifo_and_an_endless_stream_are_read_with_bounds(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as fh:
            fh.write("\n".join(str(v) for v in range(1, 2001)) + "\n")

    writer = threading.Thread(target=write)
    writer.start()
    assert read_lengths(fifo).tolist() == list(range(1, 2001))
    writer.join()
    with pytest.raises(ValueError, match="/dev/zero line 1 is longer than 64 bytes"):
        read_lengths("/dev/zero")
