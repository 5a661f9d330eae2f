"""The PT_XLA_DEBUG_FILE parser, on output captured from torch_xla 2.9 (tests/data/ptxla_debug)."""

from __future__ import annotations

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
