"""The PT_XLA_DEBUG_FILE parser, on output captured from torch_xla 2.9 (tests/data/ptxla_debug)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from lazyscope.backends.xla.debugfile import DebugFileReader, parse_debug_text
from lazyscope.model import Frame, user_site
from lazyscope.model.ownership import make_frame

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "ptxla_debug" / "compile_two_blocks.txt"

EXECUTION_BLOCK = """
Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Execution Analysis: Graph Info: 
Execution Analysis:   Graph Hash: 0123456789abcdef0123456789abcdef
Execution Analysis:   Number of Graph Inputs: 2
Execution Analysis:   Number of Graph Outputs: 1
Execution Analysis: Python Frame Triggered Execution: 
Execution Analysis:   item (/usr/lib/python3/site-packages/torch/_tensor.py:10)
Execution Analysis:   train (/home/me/train.py:42)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================
"""


def test_parses_captured_compile_blocks() -> None:
    records, consumed = parse_debug_text(SAMPLE.read_text())
    assert [r.kind for r in records] == ["compile", "compile"]
    first = records[0]
    assert first.cause == "torch_xla.sync when exiting a profiler StepTrace region"
    assert len(first.graph_hash) == 32
    assert first.graph_hash != records[1].graph_hash
    assert first.num_inputs == 3 and first.num_outputs == 1
    assert first.frames[0].function == "sync" and first.frames[0].file.endswith("torch_xla.py")
    assert any(f.file.endswith("lazytensor_dynamic.py") for f in first.frames)
    assert first.computation_hash and "graph input size" in first.sizes_gb
    assert consumed == len(SAMPLE.read_text())


def test_partial_block_waits_for_the_rest() -> None:
    text = SAMPLE.read_text()
    cut = text.index("Number of Graph Outputs")
    records, consumed = parse_debug_text(text[:cut])
    assert records == [] and consumed <= cut
    rest_records, _ = parse_debug_text(text[consumed:])
    assert len(rest_records) == 2


def test_reader_is_incremental(tmp_path: Path) -> None:
    path = tmp_path / "debug.txt"
    text = SAMPLE.read_text()
    half = text.index("Compilation Analysis: Graph Info", 200)
    path.write_text(text[:half])
    reader = DebugFileReader(str(path))
    got = reader.read_new()
    with path.open("a") as fh:
        fh.write(text[half:])
    got += reader.read_new()
    assert len(got) == 2 and got[0].graph_hash != got[1].graph_hash
    assert reader.read_new() == []


def test_execution_block_and_its_frames() -> None:
    records, _ = parse_debug_text(EXECUTION_BLOCK)
    (rec,) = records
    assert rec.kind == "execute" and "access tensor value" in rec.cause
    frames = tuple(make_frame(f.file, f.line, f.function) for f in rec.frames)
    assert user_site(frames) == Frame("/home/me/train.py", 42, "train")


LEVEL2 = Path(__file__).resolve().parents[1] / "data" / "ptxla_debug" / "level2_steps.txt"


def test_level2_output_gives_compilations_and_executions_per_graph() -> None:
    """Captured from torch_xla 2.9 at PT_XLA_DEBUG_LEVEL=2: 3 steps and a value read."""
    records, consumed = parse_debug_text(LEVEL2.read_text())
    compiles = [r for r in records if r.kind == "compile"]
    executions = [r for r in records if r.kind == "execute"]
    assert len(compiles) == 2 and len(executions) == 4
    assert {r.graph_hash for r in executions} == {r.graph_hash for r in compiles}


def test_take_counts_executions_whatever_the_chunks(tmp_path: Path) -> None:
    """The fast path (a chunk with executions only) and the full parse agree, however the
    writes are cut: a block cut mid-line or between its rules waits for its end."""
    text = LEVEL2.read_bytes()
    whole = Counter(r.graph_hash for r in parse_debug_text(text.decode())[0]
                    if r.kind == "execute")
    for size in (1, 37, 200, 512, len(text)):
        path = tmp_path / f"debug{size}.txt"
        path.write_bytes(b"")
        reader = DebugFileReader(str(path))
        got: Counter[str] = Counter()
        compiles = 0
        for start in range(0, len(text), size):
            with path.open("ab") as fh:
                fh.write(text[start:start + size])
            new, executed = reader.take()
            compiles += len(new)
            got.update(executed)
        assert got == whole and compiles == 2, size


def test_take_rotates_a_long_file_without_losing_a_block(tmp_path: Path) -> None:
    """Past rotate_bytes the file is renamed, read to its end and removed; torch_xla opens
    the path again for its next block (a new file)."""
    text = LEVEL2.read_bytes()
    path = tmp_path / "debug.txt"
    path.write_bytes(text)
    reader = DebugFileReader(str(path))
    reader.rotate_bytes = 1000
    _, first = reader.take()
    assert not path.exists() and not (tmp_path / "debug.txt.old").exists()
    path.write_bytes(text)  # the next blocks, in a new file at the same path
    _, second = reader.take()
    assert first == second and sum(first.values()) == 4


def _block(graph: str) -> bytes:
    return EXECUTION_BLOCK.replace("0123456789abcdef0123456789abcdef", graph).encode()


def test_marked_barriers_get_the_blocks_complete_when_they_were_marked(tmp_path: Path) -> None:
    """A barrier only marks the file's size; read later, the text is cut at the marks: each
    barrier gets the blocks complete at its mark, a block cut by a mark goes to the barrier
    that saw it whole, and the read itself (the barrier now) gets what came after the last
    mark. The same counts as reading at every barrier."""
    path = tmp_path / "debug.txt"
    path.write_bytes(b"")
    reader = DebugFileReader(str(path))
    # per barrier: the graphs of the blocks written before it, and a part of the next block
    steps = [["a" * 32], ["b" * 32, "a" * 32], [], ["c" * 32]]
    expect: list[Counter[str]] = []
    carry = b""
    for k, graphs in enumerate(steps):
        text = carry + b"".join(_block(g) for g in graphs)
        nxt = _block("d" * 32) if k == len(steps) - 1 else b""
        carry = b""
        with path.open("ab") as fh:
            fh.write(text + nxt[:100])  # the next block's first 100 bytes, mid-line
        carry = nxt[100:]
        expect.append(Counter(graphs))
        reader.mark()
    assert reader.marked == len(steps)
    with path.open("ab") as fh:
        fh.write(carry)
    parts = reader.take_steps()
    assert [counts for _, counts in parts] == [*expect, Counter({"d" * 32: 1})]
    assert reader.marked == 0 and reader.take_steps() == [([], Counter())]


def test_due_after_enough_bytes_or_marks(tmp_path: Path) -> None:
    path = tmp_path / "debug.txt"
    path.write_bytes(b"")
    reader = DebugFileReader(str(path))
    reader.due_bytes, reader.due_marks = 3 * len(_block("a" * 32)), 5
    assert not reader.due()
    for n in range(1, 6):
        with path.open("ab") as fh:
            fh.write(_block("a" * 32) if n <= 2 else b"")
        reader.mark()
        assert reader.due() == (n == 5), n
    with path.open("ab") as fh:
        fh.write(_block("a" * 32))
    reader.mark()
    assert reader.due()  # 3 blocks waiting
    assert sum(c["a" * 32] for _, c in reader.take_steps()) == 3 and not reader.due()


def test_marks_survive_a_rotation_and_a_program_that_reuses_the_descriptor(
        tmp_path: Path) -> None:
    """The size is read from a descriptor kept open: after the file is rotated the marks are
    of the new file; if the program closes the descriptor and opens a file of its own under
    the same number, that file is neither read nor moved and the marks stay right."""
    path = tmp_path / "debug.txt"
    path.write_bytes(_block("a" * 32))
    reader = DebugFileReader(str(path))
    reader.rotate_bytes = 10
    reader.mark()
    assert [c for _, c in reader.take_steps()] == [Counter({"a" * 32: 1}), Counter()]
    assert not path.exists()  # rotated: torch_xla starts a new file at its next block
    reader.mark()  # no file yet
    path.write_bytes(_block("b" * 32))
    reader.mark()
    held = reader._fd
    os.close(held)  # the program closes every descriptor, then opens its own file
    mine = tmp_path / "mine.txt"
    mine.write_bytes(b"the program's data")
    fd = os.open(mine, os.O_RDONLY)
    try:
        assert fd == held  # the lowest free number: the one lazyscope held
        with path.open("ab") as fh:
            fh.write(_block("c" * 32))
        reader.mark()
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        reader.rotate_bytes = 1 << 20
        parts = [c for _, c in reader.take_steps()]
        assert parts == [Counter(), Counter({"b" * 32: 1}), Counter({"c" * 32: 1}), Counter()]
    finally:
        os.close(fd)


def test_one_pass_over_marked_executions_equals_reading_at_each_barrier(tmp_path: Path) -> None:
    """A steady run's read (execution blocks only) is one pass over the text; cut at any
    marks, however the writes fall (mid-line, mid-rule, between blocks), each barrier gets what
    a reader that read at every barrier got, and both keep the same text."""
    import random

    rng = random.Random(7)
    graphs = ["a" * 32, "b" * 32, "c" * 32]
    text = b"".join(_block(rng.choice(graphs)) for _ in range(60))
    for trial in range(40):
        marked, eager = tmp_path / f"m{trial}.txt", tmp_path / f"e{trial}.txt"
        for p in (marked, eager):
            p.write_bytes(b"")
        late, now = DebugFileReader(str(marked)), DebugFileReader(str(eager))
        expect: list[Counter[str]] = []
        kept = b""
        pos = 0
        while pos < len(text):
            size = rng.choice([1, 5, 90, len(_block("a" * 32)), 700, 2500])
            for p in (marked, eager):
                with p.open("ab") as fh:
                    fh.write(text[pos:pos + size])
            pos += size
            late.mark()
            [(_, counts)] = now.take_steps()
            expect.append(counts)
            kept += now.consumed
        parts = late.take_steps()
        assert [c for _, c in parts[:-1]] == expect and parts[-1] == ([], Counter())
        assert late.consumed == kept and sum(map(sum, (c.values() for c in expect))) == 60


def test_grew_says_whether_torch_xla_wrote_since_the_last_barrier(tmp_path: Path) -> None:
    """A barrier's sync that launched nothing wrote no block: the file's size is the one seen
    at the last barrier (marked or read). No file, or a new one, is unknown: grown."""
    path = tmp_path / "debug.txt"
    reader = DebugFileReader(str(path))
    assert reader.grew()  # no file yet
    path.write_bytes(_block("a" * 32))
    reader.mark()
    assert not reader.grew()
    with path.open("ab") as fh:
        fh.write(_block("b" * 32))
    assert reader.grew()
    reader.take_steps()  # a read is a barrier too
    assert not reader.grew()
    reader.rotate_bytes = 1
    with path.open("ab") as fh:
        fh.write(_block("c" * 32))
    reader.take_steps()  # read, then the file is rotated away
    assert not path.exists() and reader.grew()  # no file: unknown
    path.write_bytes(_block("d" * 32))  # torch_xla's next block starts a new file
    assert reader.grew()
    reader.mark()
    assert not reader.grew()
