"""Padding and packing policies for variable-length batches, as pure algorithms: one definition,
used by the torch collators and samplers users paste (:mod:`lazyscope.data`), by the scenarios
that pad (``decoder``, ``hf-gpt2``, through :mod:`lazyscope.data`) and by the advisor
(``lazyscope advise``, :mod:`lazyscope.analyze.buckets`), so what the advisor predicts for a
policy is what the policy does.

Policies (``--padding``, :func:`padding_policy`; :class:`Policy` once resolved):

* ``max``        every batch padded to the maximum length: one shape
* ``longest``    padded to the batch's longest sequence: a new shape for almost every batch
* ``pow2``       padded to the next power of two from 16 (capped at the maximum length)
* ``bucket:B1,B2,...``  padded to the smallest bucket that fits (the maximum is added)
* ``bucket:auto``       buckets from the advisor on the run's own length stream
* ``packed``     sequences packed best-fit into ``batch`` rows of the maximum length
                 (:class:`Packer`): one shape, little padding; ``packed:RxL`` picks the rows
                 (R) and the row length (L)
* ``auto``       whatever the advisor recommends for the run's own length stream (any of the
                 above, a length-grouped sampler included)

Algorithms: :func:`bucket_of`, :func:`pow2_buckets`, :func:`pack_rows` (best-fit decreasing,
the one packing rule), :class:`Packer` (it over a stream, with a look-ahead buffer),
:func:`group_batches` (a length-grouped batch order), :func:`simulate_packing`.

Pure standard library (no torch).
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyscope.core.numbers import parse_int

POLICIES = ("max", "longest", "pow2", "packed", "packed:RxL", "bucket:auto", "bucket:B1,B2,...",
            "auto")
POW2_FLOOR = 16
#: a packer keeps at least this many steps' worth of tokens pending to choose from
LOOKAHEAD_STEPS = 2.0
#: a length-grouped sampler sorts pools of this many batches
GROUP_POOL = 16


def padding_policy(text: str) -> str:
    """argparse type: max | longest | pow2 | packed | packed:RxL | bucket:auto |
    bucket:B1,B2,... | auto (a bucket list is normalised: sorted, deduplicated)."""
    if text in ("max", "longest", "pow2", "packed", "bucket:auto", "auto"):
        return text
    if text.startswith("packed:"):
        rows, _, length = text[len("packed:"):].partition("x")
        try:
            r, n = int(rows), int(length)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"malformed packed shape {text!r}: expected packed:ROWSxLENGTH, e.g. packed:8x256"
            ) from None
        if r < 1 or n < 1:
            raise argparse.ArgumentTypeError(f"rows and row length must be >= 1 in {text!r}")
        return f"packed:{r}x{n}"
    if text.startswith("bucket:"):
        parts = text[len("bucket:"):].split(",")
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"malformed bucket list {text!r}: expected bucket:B1,B2,... with integers"
            ) from None
        if any(v < 1 for v in values):
            raise argparse.ArgumentTypeError(f"bucket sizes must be >= 1 in {text!r}")
        return "bucket:" + ",".join(str(v) for v in sorted(set(values)))
    raise argparse.ArgumentTypeError(
        f"unknown padding policy {text!r}; choose max, longest, pow2, packed, packed:RxL, "
        "bucket:auto, bucket:B1,B2,... or auto")


@dataclass(frozen=True)
class Policy:
    """A resolved policy: what a collate function does to each batch.

    ``kind``: ``max``, ``longest``, ``buckets`` (``pow2`` is buckets too) or ``packed``.
    ``boundaries``: the lengths batches are padded to (``max``: the max length; ``longest``:
    none). ``rows`` x ``row_len``: a packed step's shape. ``grouped``: batches are formed by a
    length-grouped sampler (:func:`group_batches`) instead of at random.
    """

    kind: str
    boundaries: tuple[int, ...] = ()
    rows: int | None = None
    row_len: int | None = None
    grouped: bool = False

    @property
    def packed(self) -> bool:
        return self.kind == "packed"

    @property
    def shapes(self) -> int | None:
        """Distinct padded lengths it makes (None: one per distinct batch maximum)."""
        if self.kind == "longest":
            return None
        return 1 if self.packed else len(self.boundaries)

    def label(self) -> str:
        """The ``--padding`` text that runs exactly this policy (``+grouped`` when batches must be
        length-grouped: the scenarios' ``--batching grouped``)."""
        if self.kind == "packed":
            text = f"packed:{self.rows}x{self.row_len}"
        elif self.kind in ("max", "longest"):
            text = self.kind
        else:
            text = "bucket:" + ",".join(str(b) for b in self.boundaries)
        return text + ("+grouped" if self.grouped else "")

    def padded_length(self, longest: int) -> int:
        """The length a batch whose longest sequence is ``longest`` is padded to (packed: the
        row length)."""
        if self.packed:
            return int(self.row_len or longest)
        if self.kind == "longest" or not self.boundaries:
            return longest
        return bucket_of(longest, list(self.boundaries))


def fixed_policy(spec: str, max_len: int, batch: int) -> Policy:
    """The policy a fixed ``--padding`` value means for a model of ``max_len`` positions and
    ``batch`` rows. ``bucket:auto`` and ``auto`` are decided by the advisor: ValueError."""
    if spec in ("auto", "bucket:auto"):
        raise ValueError(f"{spec} is decided by the advisor, not a fixed policy")
    if spec == "max":
        return Policy("max", (max_len,))
    if spec == "longest":
        return Policy("longest")
    if spec == "packed":
        return Policy("packed", (max_len,), rows=batch, row_len=max_len)
    if spec.startswith("packed:"):
        rows, _, length = spec[len("packed:"):].partition("x")
        return Policy("packed", (int(length),), rows=int(rows), row_len=int(length))
    return Policy("buckets", tuple(policy_buckets(spec, max_len)))


def bucket_of(length: int, boundaries: Sequence[int]) -> int:
    """The smallest boundary >= length (the last one if none is)."""
    for b in boundaries:
        if b >= length:
            return b
    return boundaries[-1]


def pow2_buckets(top: int, low: int = POW2_FLOOR) -> list[int]:
    """Powers of two from ``low`` up to ``top`` (``top`` itself is the last boundary)."""
    out = []
    b = low
    while b < top:
        out.append(b)
        b *= 2
    out.append(top)
    return out


def policy_buckets(policy: str, max_len: int) -> list[int]:
    """The boundaries a fixed policy pads to ([] for ``longest``, ``packed`` and the advisor's
    ``bucket:auto`` / ``auto``, which decide per run)."""
    if policy == "max":
        return [max_len]
    if policy == "pow2":
        return pow2_buckets(max_len)
    if policy.startswith("bucket:") and policy != "bucket:auto":
        return sorted({min(int(b), max_len) for b in policy[7:].split(",")} | {max_len})
    return []


def padded_length(policy: str, longest: int, max_len: int, buckets: list[int]) -> int:
    """The length a batch whose longest sequence is ``longest`` is padded to."""
    if policy == "longest":
        return longest
    return bucket_of(longest, buckets or [max_len])


def length_stream(seed: int, max_len: int, values: list[int] | None) -> Iterator[int]:
    """Seeded lengths: uniform in 1..max_len-1, or drawn from ``values``."""
    rng = random.Random(seed)
    while True:
        if values:
            yield rng.choice(values)
        else:
            yield rng.randint(1, max(1, max_len - 1))


def group_batches(lengths: Sequence[int], batch: int, rng: random.Random,
                  pool: int = GROUP_POOL) -> list[list[int]]:
    """A length-grouped batch order over items ``0..len(lengths)-1`` (taken in that order):
    pools of ``pool`` batches, each pool sorted by length and cut into batches, the batches of
    all pools shuffled by ``rng``. A trailing partial batch is kept (last)."""
    out: list[list[int]] = []
    n = len(lengths)
    step = pool * batch
    for start in range(0, n, step):
        ids = sorted(range(start, min(n, start + step)), key=lambda i: (lengths[i], i))
        out += [ids[i:i + batch] for i in range(0, len(ids), batch)]
    full = [b for b in out if len(b) == batch]
    rng.shuffle(full)
    return full + [b for b in out if len(b) < batch]


def plan_batches(stream: Iterator[int], steps: int, batch: int, grouped: bool) -> list[list[int]]:
    """The lengths of every batch of a run. Grouped: :func:`group_batches` over the stream (a
    length-grouped sampler)."""
    if not grouped:
        return [[next(stream) for _ in range(batch)] for _ in range(steps)]
    pools = math.ceil(steps / GROUP_POOL)
    lengths = [next(stream) for _ in range(pools * GROUP_POOL * batch)]
    rng = random.Random(steps * 7919 + batch)
    return [[lengths[i] for i in b] for b in group_batches(lengths, batch, rng)][:steps]


def pack_rows(lengths: Sequence[int], rows: int, row_len: int) -> tuple[list[list[int]], list[int]]:
    """Best-fit decreasing: ``(placed, left)``. Items (indices into ``lengths``) are taken
    longest first (ties: lower index first), each into the fullest row it still fits (ties:
    the lower row); ``placed[r]`` lists row r's items in placement order, ``left`` the items
    that did not fit, in index order.

    The rule a packing collate applies to the items a packing sampler chose: running it on
    only the items it placed places them the same way (a skipped item changes no row)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    free = [row_len] * rows
    placed: list[list[int]] = [[] for _ in range(rows)]
    left: list[int] = []
    for i in order:
        n = lengths[i]
        best = -1
        for r in range(rows):
            if free[r] >= n and (best < 0 or free[r] < free[best]):
                best = r
        if best < 0:
            left.append(i)
            continue
        placed[best].append(i)
        free[best] -= n
    return placed, sorted(left)


class Packer:
    """Best-fit-decreasing packing of a length stream into ``rows`` rows of ``row_len`` tokens.

    Each :meth:`next_rows` call tops a look-ahead buffer up from the stream (until it holds
    ``lookahead`` steps' worth of tokens, :data:`LOOKAHEAD_STEPS` by default), places the
    buffer's items by :func:`pack_rows` (so the longest pending sequences always go first:
    nothing long starves) and keeps what does not fit for the next call. Returns, per row, the
    list of ``(sequence id, length)`` (ids count the stream's items from 0). A finite stream
    ends with :class:`StopIteration` once nothing is pending.
    """

    def __init__(self, stream: Iterable[int], rows: int, row_len: int,
                 lookahead: float = LOOKAHEAD_STEPS):
        if rows < 1 or row_len < 1:
            raise ValueError(f"a packed step needs rows >= 1 and row length >= 1, got "
                             f"{rows}x{row_len}")
        self.stream = iter(stream)
        self.rows = rows
        self.row_len = row_len
        self.budget = max(1.0, lookahead) * rows * row_len
        self.pending: list[tuple[int, int]] = []  # (seq id, length), in id order
        self.taken = 0
        self._tokens = 0
        self._done = False

    def next_rows(self) -> list[list[tuple[int, int]]]:
        while not self._done and self._tokens < self.budget:
            try:
                length = next(self.stream)
            except StopIteration:
                self._done = True
                break
            if not 1 <= length <= self.row_len:
                raise ValueError(f"length {length} does not fit a row of {self.row_len}")
            self.pending.append((self.taken, length))
            self._tokens += length
            self.taken += 1
        if not self.pending:
            raise StopIteration
        placed, left = pack_rows([n for _, n in self.pending], self.rows, self.row_len)
        rows = [[self.pending[i] for i in row] for row in placed]
        self.pending = [self.pending[i] for i in left]
        self._tokens = sum(n for _, n in self.pending)
        return rows


def simulate_packing(lengths: list[int], rows: int, row_len: int,
                     lookahead: float = LOOKAHEAD_STEPS) -> float:
    """Padding efficiency (real / computed tokens) of :class:`Packer` over ``lengths`` cycled
    as a stream, over as many steps as the lengths fill (at least 8)."""
    if not lengths:
        return 1.0

    def cycle() -> Iterator[int]:
        while True:
            yield from lengths

    packer = Packer(cycle(), rows, row_len, lookahead)
    real = 0
    steps = max(8, math.ceil(sum(lengths) / (rows * row_len)))
    for _ in range(steps):
        real += sum(n for row in packer.next_rows() for _, n in row)
    return real / (steps * rows * row_len)


#: a lengths file's limits: lengths read at most (the rest ignored, said in a note), and the
#: bytes of one line (a longer one is not a length: /dev/zero, a binary file)
MAX_LENGTHS = 20_000_000
MAX_LINE_BYTES = 64
#: the longest sequence length advised on (2^20 tokens): the packing simulation's cost grows
#: with the row length it packs (about 7 s at 2^20 on a 2-core VM, linear beyond)
MAX_LENGTH = 1 << 20
#: the most sequences per batch advised on: the simulations' cost grows faster than linearly
#: with it (about 30 s at 4096 on 2,000 lengths on a 2-core VM)
MAX_BATCH = 4096
_CHUNK_BYTES = 1 << 22


def read_lengths(path: str | Path, *, limit: int = MAX_LENGTHS,
                 notes: list[str] | None = None) -> Any:
    """A lengths file (a 1-D int64 array): one positive integer per line, blank lines skipped;
    ``-`` is standard input. Streamed in chunks (a FIFO or a pipe works, memory stays bounded): at most
    ``limit`` lengths are read (a note in ``notes`` says so when there were more) and a line of
    more than :data:`MAX_LINE_BYTES` bytes is refused.

    Raises ValueError with a message naming the file and the bad line."""
    import sys

    import numpy as np

    name = "standard input" if str(path) == "-" else str(path)
    try:
        fh = sys.stdin.buffer if str(path) == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as err:
        raise ValueError(f"cannot read lengths file {name}: {err.strerror}") from None
    parts: list[Any] = []
    count = 0
    line_no = 0  # lines before the chunk being read
    rest = b""
    more = False
    try:
        while count < limit:
            try:
                chunk = fh.read(_CHUNK_BYTES)
            except OSError as err:
                raise ValueError(f"cannot read lengths file {name}: {err.strerror}") from None
            data = rest + chunk
            if not chunk:
                lines, rest = data.split(b"\n"), b""
            else:
                cut = data.rfind(b"\n")
                lines, rest = data[:cut + 1].split(b"\n")[:-1] if cut >= 0 else [], \
                    data[cut + 1:]
                if len(rest) > MAX_LINE_BYTES:
                    raise ValueError(f"lengths file {name} line {line_no + len(lines) + 1} is "
                                     f"longer than {MAX_LINE_BYTES} bytes: not a length")
            values = _parse_lengths(lines, name, line_no)
            line_no += len(lines)
            if count + len(values) > limit:
                values, more = values[:limit - count], True
            parts.append(values)
            count += len(values)
            if not chunk:
                break
        else:
            more = more or bool(rest.strip()) or bool(fh.read(1))
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    if not count:
        raise ValueError(f"lengths file {name} holds no lengths")
    if more and notes is not None:
        notes.append(f"read the first {limit:,} lengths of {name}; the rest were not read")
    return np.concatenate(parts)


def _parse_lengths(lines: list[bytes], name: str, first_line: int) -> Any:
    """The lengths of ``lines`` (blank ones skipped) as an int64 array; ValueError naming the
    first bad line (its number counted from ``first_line``)."""
    import numpy as np

    for i, line in enumerate(lines):
        if len(line) > MAX_LINE_BYTES:
            raise ValueError(f"lengths file {name} line {first_line + i + 1} is longer than "
                             f"{MAX_LINE_BYTES} bytes: not a length")
    words = b" ".join(lines).split()
    if len(words) != sum(1 for line in lines if line.strip()):
        bad = next(i for i, line in enumerate(lines) if len(line.split()) > 1)
        raise ValueError(f"lengths file {name} line {first_line + bad + 1}: "
                         f"{lines[bad].strip()[:30].decode('utf-8', 'replace')!r} is not a whole "
                         "number")
    try:
        values = np.array(words, dtype=np.bytes_).astype(np.int64) if words else \
            np.zeros(0, dtype=np.int64)
    except (ValueError, OverflowError):
        values = None
    if values is None or (values < 1).any() or (values > MAX_LENGTH).any():
        for i, line in enumerate(lines):  # the first bad line, said by the one number parser
            if line.strip():
                parse_int(line.decode("utf-8", "replace"),
                          f"lengths file {name} line {first_line + i + 1}", minimum=1,
                          maximum=MAX_LENGTH)
    return values
