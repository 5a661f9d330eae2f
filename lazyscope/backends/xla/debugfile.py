"""Parse torch_xla's ``PT_XLA_DEBUG_LEVEL`` output (written to ``PT_XLA_DEBUG_FILE``).

torch_xla 2.9 writes text blocks like this one for each compilation (level >= 1) and, at level
>= 2, for each execution (lazyscope traces at level 2: the execution blocks tell which graph
each execution ran)::

    Compilation Analysis: ================================================================
    Compilation Analysis: Compilation Cause
    Compilation Analysis:   user torch_xla.sync
    Compilation Analysis: Graph Info:
    Compilation Analysis:   Graph Hash: d4cf18266cf36461a19db44e9e83ce36
    Compilation Analysis:   Number of Graph Inputs: 3
    Compilation Analysis:   Number of Graph Outputs: 4
    Compilation Analysis: Python Frame Triggered Execution:
    Compilation Analysis:   sync (/.../torch_xla/torch_xla.py:87)
    Compilation Analysis:   <module> (/tmp/train.py:15)
    Compilation Analysis: ----------------------------------------------------------------
    Compilation Analysis: ================================================================

followed, for a compilation, by ``Computation hash: ...`` and a ``Post Compilation Analysis``
block with the program's memory sizes. This text is the only place torch_xla states a
compilation's cause and Python frames, so it is parsed here and nowhere else
(see ``tests/unit/test_ptxla_debug.py`` for the captured samples).

Pure text processing: no torch_xla import.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from lazyscope.model import Frame, GraphMemory
from lazyscope.store.layout import DEBUG_FILE, DEBUG_FILE_OLD

_PREFIXES = {
    "Compilation Analysis: ": "compile",
    "Execution Analysis: ": "execute",
    "Unexpected Execution Analysis: ": "execute",
    "Post Compilation Analysis: ": "post",
}
_FRAME_RE = re.compile(r"^(?P<function>.*?) \((?P<file>.*):(?P<line>\d+)\)$")
_SIZE_RE = re.compile(r"^(?P<key>[A-Za-z ]+ size): (?P<value>[0-9.]+) GB$")
#: torch_xla's Post Compilation Analysis lines -> GraphMemory fields. torch_xla prints the
#: executable's CompiledMemoryStats bytes divided by 2**30 ("GB"), to 6 decimals
_SIZE_FIELDS = {"graph input size": "inputs", "graph output size": "outputs",
                "aliased input size": "aliased", "intermediate tensor size": "intermediates",
                "compiled program size": "program"}
GIB = 1 << 30


def graph_memory(sizes_gb: dict[str, float]) -> GraphMemory | None:
    """The memory of a compiled graph from its Post Compilation Analysis sizes; None when the
    block was not there (it is written from ``PT_XLA_DEBUG_LEVEL`` 1 on)."""
    values = {field: round(sizes_gb[key] * GIB) for key, field in _SIZE_FIELDS.items()
              if key in sizes_gb}
    return GraphMemory(**values) if values else None


@dataclass
class DebugRecord:
    """One analysis block: a compilation or an execution, with its cause and frames."""

    kind: str  # "compile" | "execute"
    cause: str = ""
    graph_hash: str = ""
    graph_name: str = ""
    num_inputs: int | None = None
    num_outputs: int | None = None
    frames: list[Frame] = field(default_factory=list)
    computation_hash: str = ""
    sizes_gb: dict[str, float] = field(default_factory=dict)
    unexpected: bool = False


def _parse_block(kind: str, lines: list[str], unexpected: bool) -> DebugRecord:
    rec = DebugRecord(kind=kind, unexpected=unexpected)
    section = ""
    for raw in lines:
        text = raw.rstrip()
        stripped = text.strip()
        if not stripped or set(stripped) <= {"=", "-"}:
            continue
        if not text.startswith("  "):
            section = stripped.rstrip(":").strip()
            continue
        if section in ("Compilation Cause", "Execution Cause"):
            rec.cause = f"{rec.cause}; {stripped}" if rec.cause else stripped
        elif section == "Graph Info":
            key, _, value = stripped.partition(":")
            value = value.strip()
            if key == "Graph Hash":
                rec.graph_hash = value
            elif key == "Graph Name":
                rec.graph_name = value
            elif key == "Number of Graph Inputs" and value.isdigit():
                rec.num_inputs = int(value)
            elif key == "Number of Graph Outputs" and value.isdigit():
                rec.num_outputs = int(value)
        elif section == "Python Frame Triggered Execution":
            m = _FRAME_RE.match(stripped)
            if m:
                rec.frames.append(Frame(m["file"], int(m["line"]), m["function"]))
    return rec


def parse_debug_text(text: str) -> tuple[list[DebugRecord], int]:
    """Parse complete blocks from ``text``.

    Returns ``(records, consumed)`` where ``consumed`` is the number of characters that belong to
    complete blocks: the caller keeps the rest and passes it again with the next chunk, so a block
    split across two reads is parsed once, whole.
    """
    records: list[DebugRecord] = []
    lines = text.splitlines(keepends=True)
    pos = 0  # characters consumed so far
    current_kind: str | None = None
    current_unexpected = False
    block: list[str] = []
    block_start = 0
    rule_count = 0
    offset = 0
    for line in lines:
        line_start = offset
        offset += len(line)
        if not line.endswith("\n"):
            break  # incomplete last line: wait for more
        prefix = next((p for p in _PREFIXES if line.startswith(p)), None)
        if prefix is None:
            if current_kind is None:
                stripped = line.strip()
                if stripped.startswith("Computation hash:"):
                    value = stripped.partition(":")[2].strip()
                    last_compile = next((r for r in reversed(records) if r.kind == "compile"), None)
                    if last_compile is not None:
                        last_compile.computation_hash = value
                pos = offset
            continue
        kind = _PREFIXES[prefix]
        body = line[len(prefix):]
        if current_kind is None:
            current_kind = kind
            current_unexpected = prefix.startswith("Unexpected")
            block = []
            block_start = line_start
            rule_count = 0
        if body.strip() and set(body.strip()) == {"="}:
            rule_count += 1
            if rule_count == 2:  # closing rule: the block is complete
                if current_kind == "post":
                    last_compile = next((r for r in reversed(records) if r.kind == "compile"), None)
                    if last_compile is not None:
                        for b in block:
                            m = _SIZE_RE.match(b.strip())
                            if m:
                                last_compile.sizes_gb[m["key"].lower()] = float(m["value"])
                else:
                    records.append(_parse_block(current_kind, block, current_unexpected))
                current_kind = None
                pos = offset
            continue
        block.append(body)
    del block_start
    return records, pos


#: the graph hash line of an execution block (all a steady step needs from the file) and the
#: start of its rule lines: each block opens and closes with one (torch_xla writes a newline
#: *before* each block, so nothing follows the last one until the next is written). Found with
#: ``bytes.count``/``find``/``split``: a multiline regular expression over the same text took
#: ~10x as long (250 us for 32 KB), on the thread that feeds the device
_EXEC_HASH = b"\nExecution Analysis:   Graph Hash: "
_EXEC_RULE = b"\nExecution Analysis: ===="


def _complete_end(text: bytes) -> int:
    """Where the last complete execution block of ``text`` ends (0: none is complete). ``text``
    starts at a line's start, with its newline: every rule line is ``\n`` + the rule."""
    n = text.count(_EXEC_RULE)
    pos = len(text)
    last = text.rfind(_EXEC_RULE)
    if last >= 0 and text.find(b"\n", last + 1) < 0:  # the last rule line is being written
        n, pos = n - 1, last
    if n % 2:  # the last block is being written: it ends before its opening rule
        n, pos = n - 1, text.rfind(_EXEC_RULE, 0, pos)
    if n <= 0:
        return 0
    return text.find(b"\n", text.rfind(_EXEC_RULE, 0, pos) + 1) + 1


def _executions_by_cut(data: bytes, cuts: list[int]) -> tuple[list[Counter[str]], int]:
    """({graph hash: execution blocks} per cut, where the complete blocks end) of text with
    execution blocks only: each complete block counted at the first cut (ascending, in
    ``data``) it ends by, one ``bytes.find`` pass."""
    text = b"\n" + data  # a rule line at the very start has its newline too
    end = _complete_end(text)
    out: list[Counter[str]] = [Counter() for _ in cuts]
    at = text.find(_EXEC_HASH, 0, end)
    while at >= 0:
        value = at + len(_EXEC_HASH)
        line_end = text.find(b"\n", value)
        block_end = text.find(b"\n", text.find(_EXEC_RULE, line_end) + 1)  # in data
        graph = text[value:line_end].strip().decode("ascii", "replace")
        out[bisect.bisect_left(cuts, block_end)][graph] += 1
        at = text.find(_EXEC_HASH, line_end, end)
    return out, max(end - 1, 0)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class DebugFileReader:
    """Reads a growing PT_XLA_DEBUG_FILE incrementally, a step's part at a time.

    A steady step writes one execution block per execution (``PT_XLA_DEBUG_LEVEL=2``, 1-4 KB
    each); reading and counting them at every step barrier was most of lazyscope's work in the
    step loop (an open, a read and two regular expressions on the thread that feeds the device).
    So a barrier only *marks* how far the file has grown (:meth:`mark`: one ``fstat`` of a
    descriptor kept open for it, ~1 us, where an ``open`` + ``read`` was ~20 us); the new
    text is read when :meth:`due` says so (enough bytes or barriers waiting, or a compilation
    to explain now) and :meth:`take_steps` cuts it at the marks: each barrier gets exactly the
    blocks complete by the time it was marked, as if it had been read then.

    Each part's compilation records are parsed in full. Text with no compilation block in it
    (a steady run's every read) is not parsed line by line: one pass with ``bytes.find`` counts
    its execution blocks by graph hash, each in the part of the first mark it ends by.

    Once more than :attr:`rotate_bytes` were read, the file is renamed, read to its end and
    removed, and torch_xla starts a new one at the same path (it opens the file for each block
    it appends). The file is the process's own (see ``session.py``); a run keeps the analyses of
    its compilations (:attr:`analysis`) as its ``xla_debug.txt``."""

    rotate_bytes = 4 << 20
    #: read once this much text is waiting ...
    due_bytes = 32 << 10
    #: ... or this many barriers
    due_marks = 64

    def __init__(self, path: str):
        self.path = path
        self._offset = 0
        self._pending = b""
        #: the file's size at each barrier marked since the last read
        self._marks: list[int] = []
        #: a descriptor of the file, for its size only (the text is read by name), and the
        #: file's (device, inode) when it was opened
        self._fd = -1
        self._ident = (0, 0)
        #: the text the last take parsed when it held a compilation analysis ("" for steady
        #: steps), and every complete block it consumed: what a run keeps as its
        #: ``xla_debug.txt``
        self.analysis = ""
        self.consumed = b""
        #: the file's size at the last barrier (marked or read; -1: unknown)
        self.size_seen = -1

    def _read(self, path: str, offset: int) -> tuple[bytes, int]:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
                return chunk, offset + len(chunk)
        except FileNotFoundError:
            return b"", offset

    def _chunk(self) -> bytes:
        chunk, self._offset = self._read(self.path, self._offset)
        if self._offset > self.rotate_bytes:
            old = self.path + DEBUG_FILE_OLD[len(DEBUG_FILE):]
            try:
                os.replace(self.path, old)
            except OSError:
                return chunk
            rest, _ = self._read(old, self._offset)  # what was appended before the rename
            chunk += rest
            self._offset = 0
            self._close()  # torch_xla makes a new file at the path for its next block
            with contextlib.suppress(OSError):
                os.unlink(old)
        return chunk

    def _close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def _size(self, reopen: bool = False) -> int:
        """The file's size now, -1 when there is no file (nothing was executed yet). The
        descriptor is never trusted blindly: a program may close it and reuse its number for
        a file of its own (only ``fstat``, which changes nothing, is used on it), and the file
        at the path is replaced at each rotation; ``reopen``: check it is still the file at the
        path."""
        try:
            if self._fd >= 0:
                st = os.fstat(self._fd)
                if (st.st_dev, st.st_ino) == self._ident and not (
                        reopen and self._ident != _ident(os.stat(self.path))):
                    return st.st_size
                if (st.st_dev, st.st_ino) == self._ident:
                    self._close()
                self._fd = -1  # else the number is not ours to close any more
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            st = os.fstat(fd)
            self._fd, self._ident = fd, _ident(st)
            return st.st_size
        except OSError:
            return -1

    def mark(self) -> None:
        """A step barrier: note how far the file has grown (its blocks complete by now are
        that step's)."""
        size = self.size_seen = self._size()
        if size < 0:
            size = self._marks[-1] if self._marks else self._offset
        self._marks.append(size)

    def grew(self) -> bool:
        """Whether torch_xla wrote to the file since the last barrier (True when unknown: no
        file yet, or a new one since a rotation)."""
        size = self._size()
        return size < 0 or size != self.size_seen

    def due(self) -> bool:
        """Whether the text waiting since the last read should be read now."""
        marks = self._marks
        return bool(marks) and (len(marks) >= self.due_marks or
                                marks[-1] - self._offset >= self.due_bytes)

    @property
    def marked(self) -> int:
        """Barriers marked since the last read."""
        return len(self._marks)

    def take(self) -> tuple[list[DebugRecord], Counter[str]]:
        """(new compilation records, {graph hash: executions}) since the last read, the
        barriers marked since then included."""
        parts = self.take_steps()
        records = [r for part, _ in parts for r in part]
        executions: Counter[str] = Counter()
        for _, counts in parts:
            executions.update(counts)
        return records, executions

    def take_steps(self) -> list[tuple[list[DebugRecord], Counter[str]]]:
        """Everything new, cut at the marks: one ``(compilation records, {graph hash:
        executions})`` per marked barrier, then one for what came after the last mark (the
        barrier now)."""
        marks, self._marks = self._marks, []
        # once per read: the marks to come are of the file at the path
        self.size_seen = self._size(reopen=True)
        self.analysis, self.consumed = "", b""
        start = self._offset - len(self._pending)  # the file position of the text's first byte
        data = self._pending + self._chunk()
        cuts = [min(max(m - start, 0), len(data)) for m in marks] + [len(data)]
        if b"Compilation Analysis" not in data and b"Unexpected" not in data:
            return self._take_executions(data, list(itertools.accumulate(cuts, max)))
        out = []
        rest, prev = b"", 0
        analysis, consumed = [], []
        for cut in cuts:
            cut = max(cut, prev)
            records, executions, rest, text = self._part(rest + data[prev:cut])
            prev = cut
            out.append((records, executions))
            consumed.append(text)
            if records or b"Compilation Analysis" in text:
                analysis.append(text.decode("utf-8", "replace"))
        self._pending = rest
        self.consumed = b"".join(consumed)
        self.analysis = "".join(analysis)
        return out

    def _take_executions(self, data: bytes, cuts: list[int]) -> list[tuple[list[DebugRecord],
                                                                          Counter[str]]]:
        """:meth:`take_steps` of text with execution blocks only (a steady run's every read):
        each part's blocks as if it had been read at its barrier."""
        counts, complete = _executions_by_cut(data, cuts)
        self._pending, self.consumed = data[complete:], data[:complete]
        return [([], c) for c in counts]

    @staticmethod
    def _part(data: bytes) -> tuple[list[DebugRecord], Counter[str], bytes, bytes]:
        """(compilation records, executions, the incomplete rest, the complete text)."""
        if not data:
            return [], Counter(), b"", b""
        if b"Compilation Analysis" not in data and b"Unexpected" not in data:
            [counts], complete = _executions_by_cut(data, [len(data)])
            return [], counts, data[complete:], data[:complete]
        text = data.decode("utf-8", errors="replace")
        records, consumed = parse_debug_text(text)
        executions = Counter(r.graph_hash for r in records if r.kind == "execute" and r.graph_hash)
        complete = text[:consumed].encode("utf-8")
        return [r for r in records if r.kind != "execute"], executions, \
            text[consumed:].encode("utf-8"), complete

    @property
    def offset(self) -> int:
        """How far the file has been read (bytes)."""
        return self._offset

    def read_new(self) -> list[DebugRecord]:
        """Every new complete record (compilations and executions), parsed in full."""
        data = self._pending + self._chunk()
        if not data:
            return []
        text = data.decode("utf-8", errors="replace")
        records, consumed = parse_debug_text(text)
        self._pending = text[consumed:].encode("utf-8")
        return records
