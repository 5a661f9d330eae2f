"""The IR dump parser (backends/xla_graphs.py) on a captured torch_xla 2.9 sample."""

from __future__ import annotations

from pathlib import Path

from lazyscope.backends.xla_graphs import GraphDumpReader, parse_graph_dump
from tests.conftest import DATA

SAMPLE = (DATA / "xla_graphs" / "sample.txt").read_text()


def test_parses_complete_blocks_with_input_shapes() -> None:
    records, consumed = parse_graph_dump(SAMPLE)
    assert [r.graph_hash for r in records] == [
        "35a48b8dbe9e82d65e793cb3d14fbed1", "5156fbf4f7db8524d549a2f2935f2af3"]
    first, second = records
    assert first.inputs == [("f32", [32]), ("f32", [32, 32]), ("f32", [8, 32])]
    assert first.ops["aten::addmm"] == 1 and first.ops["xla::device_data"] == 3
    assert [s for _, s in second.inputs] == [[], [], [32], [32, 32], [8, 32], [], []]
    assert first.ir_digest and first.ir_digest != second.ir_digest
    assert SAMPLE[consumed:].lstrip().startswith("[ScheduleSyncTensorsGraph]")  # cut block waits


def test_known_hashes_are_skipped() -> None:
    known = {"35a48b8dbe9e82d65e793cb3d14fbed1"}
    records, _ = parse_graph_dump(SAMPLE, known)
    assert [r.graph_hash for r in records] == ["5156fbf4f7db8524d549a2f2935f2af3"]
    assert "5156fbf4f7db8524d549a2f2935f2af3" in known


def test_reader_reads_incrementally_and_truncates(tmp_path: Path) -> None:
    base = tmp_path / "graphs.txt"
    path = tmp_path / "graphs.txt.0"  # torch_xla appends the ordinal
    cut = SAMPLE.index("## END_GRAPH") + 5
    path.write_text(SAMPLE[:cut])
    reader = GraphDumpReader(str(base), truncate=True)
    assert reader.read_new() == []  # the first block is not complete yet
    with open(path, "a") as fh:
        fh.write(SAMPLE[cut:])
    got = reader.read_new()
    assert [r.graph_hash[:8] for r in got] == ["35a48b8d", "5156fbf4"]
    assert path.stat().st_size > 0  # a cut block remains: not truncated
    assert reader.lookup("5156fbf4f7db8524d549a2f2935f2af3") is got[1]
    path.write_text("")
    reader2 = GraphDumpReader(str(base), truncate=True)
    path.write_text(SAMPLE[: SAMPLE.index("## END_GRAPH") + len("## END_GRAPH\n")])
    assert len(reader2.read_new()) == 1
    assert path.stat().st_size == 0  # everything consumed: truncated
