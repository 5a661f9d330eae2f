"""Input shapes and op counts of every graph torch_xla syncs, from ``XLA_SAVE_TENSORS_FILE``.

Why this source (torch_xla 2.9, measured in ``benchmarks/graph_dump_overhead.py``):

* ``PT_XLA_DEBUG_LEVEL=1`` names a compilation's cause, graph hash, input *count* and frames,
  but not the inputs' shapes, which is what explains most recompilations.
* ``XLA_SAVE_TENSORS_FILE`` with ``XLA_SAVE_TENSORS_FMT=text`` makes torch_xla's C++
  ``SyncTensorsGraphInternal`` append, for every sync (barrier or value read), the IR text of the
  graph and then ``Graph Hash: <hash>``: the same hash PT_XLA_DEBUG prints for the compilation.
  The IR lists every graph input as ``%5 = f32[4,3,32]{2,1,0} xla::device_data()``, so the
  exact dtypes and shapes of the inputs are there. Writing it costs O(graph) per sync in C++ and
  nothing else: it compiles nothing, executes nothing and transfers nothing (checked by
  ``tests/integration/test_xla_trace.py``). ``_get_xla_tensors_text`` would need the pending
  tensors, which Python cannot enumerate at a barrier; an XLA HLO dump comes only at compile time
  but has no graph hash to join on.
* torch_xla reopens the file (append) for every write, so the collector reads the new text at
  each barrier, keeps a compact record only for graph hashes it has not seen, and truncates the
  file (when lazyscope chose it) so a long run does not fill the disk.

Pure text processing here; the collector in ``xla.py`` does the file handling.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field

_HASH_RE = re.compile(r"^Graph Hash: (?P<hash>[0-9a-f]+)\s*$", re.M)
_DATA_RE = re.compile(
    r"^\s*%\d+ = (?P<dtype>[a-z]+\d*)\[(?P<shape>[^\]]*)\]\S* xla::device_data\(\)", re.M
)
_OP_RE = re.compile(r"^\s*%\d+ = \S+ (?P<op>[A-Za-z_:.0-9]+)\(", re.M)
END = "## END_GRAPH"


@dataclass
class GraphInputs:
    """What one graph consumed: its inputs (dtype, shape) in IR order, and its op counts."""

    graph_hash: str
    inputs: list[tuple[str, list[int]]] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)
    ir_digest: str = ""  # sha1 of the IR text: equal IR <=> equal digest

    def to_json(self) -> dict[str, object]:
        return {
            "input_dtypes": [d for d, _ in self.inputs],
            "input_shapes": [s for _, s in self.inputs],
            "ops": self.ops,
            "ir_digest": self.ir_digest,
        }


def _shape(text: str) -> list[int]:
    dims = []
    for part in text.split(","):
        part = part.strip().lstrip("<=")
        if part.isdigit():
            dims.append(int(part))
    return dims


def parse_graph_block(block: str) -> GraphInputs | None:
    """Parse one ``... ## END_GRAPH`` block; None when it has no graph hash."""
    m = _HASH_RE.search(block)
    if m is None:
        return None
    inputs = [(d["dtype"], _shape(d["shape"])) for d in _DATA_RE.finditer(block)]
    ops = Counter(o["op"] for o in _OP_RE.finditer(block))
    start = block.find("## BEGIN_GRAPH")
    ir = block[start: m.start()] if start >= 0 else block[: m.start()]
    digest = hashlib.sha1(ir.encode("utf-8")).hexdigest()[:16]
    return GraphInputs(m["hash"], inputs, dict(sorted(ops.items())), digest)


def parse_graph_dump(text: str, known: set[str] | None = None) -> tuple[list[GraphInputs], int]:
    """Parse the complete blocks of ``text``; return ``(records, consumed_chars)``.

    Blocks whose graph hash is in ``known`` are skipped without parsing their IR (the common
    case at a cached step). The caller keeps ``text[consumed:]`` for the next read.
    """
    records: list[GraphInputs] = []
    pos = 0
    while True:
        end = text.find(END, pos)
        if end < 0:
            break
        stop = end + len(END)
        block = text[pos:stop]
        pos = stop
        m = _HASH_RE.search(block)
        if m is None or (known is not None and m["hash"] in known):
            continue
        rec = parse_graph_block(block)
        if rec is not None:
            records.append(rec)
            if known is not None:
                known.add(rec.graph_hash)
    return records, pos


class GraphDumpReader:
    """Reads torch_xla's growing IR dump (``XLA_SAVE_TENSORS_FILE``, one file per ordinal)."""

    def __init__(self, base: str, *, truncate: bool):
        self.base = base
        self.truncate = truncate
        self.known: set[str] = set()
        self.graphs: dict[str, GraphInputs] = {}
        self._offsets: dict[str, int] = {}
        self._pending: dict[str, str] = {}

    def files(self) -> list[str]:
        """torch_xla appends the device ordinal to the name (``file.0``)."""
        return sorted({*glob.glob(glob.escape(self.base) + ".*"), *glob.glob(glob.escape(self.base))})

    def skip_existing(self) -> None:
        """Ignore what an earlier trace in this process wrote."""
        for path in self.files():
            try:
                self._offsets[path] = os.path.getsize(path)
            except OSError:
                pass

    def read_new(self) -> list[GraphInputs]:
        """New graphs (by hash) since the last call."""
        out: list[GraphInputs] = []
        for path in self.files():
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    fh.seek(self._offsets.get(path, 0))
                    chunk = fh.read()
                    offset = fh.tell()
            except OSError:
                continue
            text = self._pending.get(path, "") + chunk
            records, consumed = parse_graph_dump(text, self.known)
            rest = text[consumed:]
            if not rest.strip():
                rest = ""
            if self.truncate and not rest:
                try:
                    os.truncate(path, 0)
                    offset = 0
                except OSError:
                    pass
            self._offsets[path] = offset
            self._pending[path] = rest
            for rec in records:
                self.graphs[rec.graph_hash] = rec
            out.extend(records)
        return out

    def lookup(self, graph_hash: str) -> GraphInputs | None:
        if graph_hash not in self.graphs:
            self.read_new()
        return self.graphs.get(graph_hash)
