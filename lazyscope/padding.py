"""Padding and packing policies for variable-length batches: one definition, used by the
scenarios that pad (``decoder``, ``hf-gpt2``) and by the bucket advisor (``lazyscope advise``,
``analyze/buckets.py``), so what the advisor predicts for a policy is what the policy does.

Policies (``--padding``):

* ``max``        every batch padded to the maximum length: one shape
* ``longest``    padded to the batch's longest sequence: a new shape for almost every batch
* ``pow2``       padded to the next power of two from 16 (capped at the maximum length)
* ``bucket:B1,B2,...``  padded to the smallest bucket that fits (the maximum is added)
* ``bucket:auto``       buckets from the advisor on the run's own length stream
* ``packed``     sequences packed best-fit into ``batch`` rows of the maximum length
                 (:class:`Packer`): one shape, little padding

Pure standard library.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Iterator
from pathlib import Path

POLICIES = ("max", "longest", "pow2", "packed", "bucket:auto", "bucket:B1,B2,...")
POW2_FLOOR = 16


def padding_policy(text: str) -> str:
    """argparse type: max | longest | pow2 | packed | bucket:auto | bucket:B1,B2,... (a bucket
    list is normalised: sorted, deduplicated)."""
    if text in ("max", "longest", "pow2", "packed", "bucket:auto"):
        return text
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
        f"unknown padding policy {text!r}; choose max, longest, pow2, packed, bucket:auto "
        "or bucket:B1,B2,...")


def bucket_of(length: int, boundaries: list[int]) -> int:
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
    """The boundaries a fixed policy pads to ([] for ``longest``, ``packed`` and
    ``bucket:auto``, which decide per run)."""
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


def plan_batches(stream: Iterator[int], steps: int, batch: int, grouped: bool) -> list[list[int]]:
    """The lengths of every batch of a run. Grouped: pools of 16 batches sorted by length, cut
    into batches, batch order shuffled (a length-grouped sampler)."""
    if not grouped:
        return [[next(stream) for _ in range(batch)] for _ in range(steps)]
    out: list[list[int]] = []
    rng = random.Random(steps * 7919 + batch)
    while len(out) < steps:
        pool = sorted(next(stream) for _ in range(16 * batch))
        chunks = [pool[i:i + batch] for i in range(0, len(pool), batch)]
        rng.shuffle(chunks)
        out += chunks
    return out[:steps]


class Packer:
    """Best-fit-decreasing packing of a length stream into ``rows`` rows of ``row_len`` tokens.

    Each :meth:`next_rows` call tops a look-ahead buffer up from the stream, places the buffer's
    longest sequences first, each into the fullest row it still fits, and keeps what does not
    fit for the next call (so the longest pending sequences always go first: nothing starves).
    Returns, per row, the list of sequence ids (indices into the stream) and their lengths.
    """

    def __init__(self, stream: Iterator[int], rows: int, row_len: int,
                 lookahead: int | None = None):
        self.stream = stream
        self.rows = rows
        self.row_len = row_len
        self.lookahead = lookahead or 4 * rows
        self.pending: list[tuple[int, int]] = []  # (seq id, length)
        self.taken = 0

    def next_rows(self) -> list[list[tuple[int, int]]]:
        while len(self.pending) < self.lookahead:
            length = next(self.stream)
            if not 1 <= length <= self.row_len:
                raise ValueError(f"length {length} does not fit a row of {self.row_len}")
            self.pending.append((self.taken, length))
            self.taken += 1
        order = sorted(self.pending, key=lambda p: (-p[1], p[0]))
        free = [self.row_len] * self.rows
        rows: list[list[tuple[int, int]]] = [[] for _ in range(self.rows)]
        left = []
        for sid, length in order:
            fits = [r for r in range(self.rows) if free[r] >= length]
            if not fits:
                left.append((sid, length))
                continue
            r = min(fits, key=lambda r: (free[r], r))
            rows[r].append((sid, length))
            free[r] -= length
        self.pending = sorted(left)
        return rows


def simulate_packing(lengths: list[int], rows: int, row_len: int) -> float:
    """Padding efficiency of :class:`Packer` over ``lengths`` (cycled as a stream)."""
    if not lengths:
        return 1.0

    def cycle() -> Iterator[int]:
        while True:
            yield from lengths

    packer = Packer(cycle(), rows, row_len)
    real = 0
    steps = max(1, math.ceil(sum(lengths) / (rows * row_len)))
    for _ in range(steps):
        real += sum(n for row in packer.next_rows() for _, n in row)
    return real / (steps * rows * row_len)


def read_lengths(path: str | Path) -> list[int]:
    """A lengths file: one positive integer per line, blank lines skipped.

    Raises ValueError with a message naming the file and the bad line."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot read lengths file {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"lengths file {path} is not text") from None
    values = []
    for n, line in enumerate(raw.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            v = int(line)
        except ValueError:
            raise ValueError(f"lengths file {path} line {n}: {line[:30]!r} is not an integer") from None
        if v < 1:
            raise ValueError(f"lengths file {path} line {n}: length {v} is below 1")
        values.append(v)
    if not values:
        raise ValueError(f"lengths file {path} holds no lengths")
    return values
