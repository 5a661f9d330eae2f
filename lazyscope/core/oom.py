"""Out-of-device-memory errors, read from the runtime's own words.

XLA says ``RESOURCE_EXHAUSTED`` when a program does not fit: at compile time (XLA knows before
anything runs: "Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm
capacity by 6.47G.", often followed by "Largest program allocations in hbm" with each buffer's
size, shape, the HLO instruction and sometimes the source line), or at run time ("Error
allocating device buffer: Attempting to allocate 196.00M. That was not possible. There are
134.44M free."; older runtimes: "Attempting to reserve 6.48G at the bottom of memory").
PyTorch's CUDA allocator raises ``torch.OutOfMemoryError`` ("CUDA out of memory. Tried to
allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 1.19 MiB is free ...").

:func:`parse_out_of_memory` turns any of these texts into an :class:`OutOfMemoryText`;
``tests/unit/test_oom.py`` holds real messages from public pytorch/xla, JAX and PyTorch issues.
Pure text processing: standard library only.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

#: XLA's human-readable sizes (tsl HumanReadableNumBytes: powers of 1024)
_XLA_SIZE = r"(?:\d+(?:\.\d+)?[KMGTP]?B?|0B)"
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50,
          "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "BYTES": 1}

_COMPILE_RE = re.compile(
    rf"Ran out of memory in memory space (?P<space>\w+)\.\s*Used (?P<used>{_XLA_SIZE}) of "
    rf"(?P<limit>{_XLA_SIZE}) \w+\.(?:\s*Exceeded \w+ capacity by (?P<over>{_XLA_SIZE})\.)?")
_SPACE_RE = re.compile(r"Ran out of memory in memory space (?P<space>\w+)")
_RUNTIME_RE = re.compile(
    rf"Attempting to (?:allocate|reserve) (?P<asked>{_XLA_SIZE})(?: at the bottom of memory)?\."
    rf"\s*That was not possible\.\s*There are (?P<free>{_XLA_SIZE}) free")
_CUDA_RE = re.compile(r"CUDA out of memory\. Tried to allocate (?P<asked>[\d.]+ ?[KMGT]?i?B)")
_CUDA_TOTAL_RE = re.compile(
    r"total capacit(?:y|ty) of (?P<total>[\d.]+ ?[KMGT]?i?B) of which (?P<free>[\d.]+ ?"
    r"(?:[KMGT]?i?B|bytes)) is free")
_CUDA_OLD_RE = re.compile(r"\(GPU \d+; (?P<total>[\d.]+ ?[KMGT]?i?B) total capacity;.*?"
                          r"(?P<free>[\d.]+ ?[KMGT]?i?B) free")
_BUFFER_RE = re.compile(
    rf"^\s*\d+\.\s*Size: (?P<size>{_XLA_SIZE})\s*$(?P<body>(?:\n(?!\s*\d+\.\s*Size:).*)*)",
    re.M)
_SHAPE_RE = re.compile(r"^\s*Shape: (?P<shape>\S+)", re.M)
_KIND_RE = re.compile(r"^\s*Allocation type: (?P<kind>.+?)\s*$", re.M)
_SOURCE_RE = re.compile(r'source_file="(?P<file>[^"]+)" source_line=(?P<line>\d+)')
_LABEL_RE = re.compile(r"^\s*XLA label: (?P<label>\S+)", re.M)
#: buffers kept from a message (its largest first, as XLA lists them)
MAX_BUFFERS = 3


#: a message that says RESOURCE_EXHAUSTED without sizes is out of memory only when it speaks of
#: memory: the same status is gRPC's for a quota or a rate limit (a storage or API call)
_MEMORY_WORDS = re.compile(r"memory|allocat|\bOOM\b|\bhbm\b|\bvmem\b", re.I)
_QUOTA_WORDS = re.compile(r"quota|rate.?limit|too many requests|\b429\b", re.I)
#: the most digits of a size in a message (more is no size a device has)
_MAX_SIZE_DIGITS = 24


def size_bytes(text: str) -> int:
    """``21.95G`` / ``530.00M`` / ``0B`` (XLA) or ``20.00 MiB`` (PyTorch) in bytes; ValueError
    for anything else, a size of more than 24 digits included."""
    m = re.fullmatch(r"\s*(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<u>[A-Za-z]*)\s*", text)
    if m is None or m["u"].upper() not in _UNITS or len(m["n"]) > _MAX_SIZE_DIGITS:
        raise ValueError(f"not a size: {text[:40]!r}")
    return int(round(float(m["n"]) * _UNITS[m["u"].upper()]))


def _size(text: str | None) -> int | None:
    """:func:`size_bytes`, None where the message's size cannot be one (a 400-digit number)."""
    if text is None:
        return None
    try:
        return size_bytes(text)
    except (ValueError, OverflowError):
        return None


@dataclass
class Buffer:
    """One buffer an out-of-memory message lists."""

    size: int
    shape: str = ""
    kind: str = ""
    #: the user line XLA's metadata names (``file:line``), or the HLO instruction
    where: str = ""

    def text(self, human: Any) -> str:
        parts = [p for p in (self.kind, self.where) if p]
        return f"{human(self.size)} {self.shape}".strip() + (f" ({', '.join(parts)})"
                                                             if parts else "")


@dataclass
class OutOfMemoryText:
    """An out-of-memory error, parsed. ``kind``: ``compile`` (XLA, the program does not fit),
    ``runtime`` (XLA, an allocation failed while running), ``cuda`` (PyTorch's allocator).
    ``needed``: what the program or the allocation asked for; ``limit``: the device's capacity
    (compile, CUDA); ``free``: what was free; ``over``: by how much it did not fit."""

    kind: str
    space: str = ""
    needed: int | None = None
    limit: int | None = None
    free: int | None = None
    over: int | None = None
    buffers: list[Buffer] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> OutOfMemoryText | None:
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            return None
        try:
            buffers = [Buffer(int(b["size"]), str(b.get("shape", "")), str(b.get("kind", "")),
                              str(b.get("where", ""))) for b in data.get("buffers") or []]
            ints = {k: (int(data[k]) if isinstance(data.get(k), int) else None)
                    for k in ("needed", "limit", "free", "over")}
        except (KeyError, TypeError, ValueError):
            return None
        return cls(kind=data["kind"], space=str(data.get("space", "")), buffers=buffers, **ints)

    def summary(self, human: Any) -> str:
        """``XLA compile: needs 21.95 GiB of 15.48 GiB hbm (6.47 GiB over); largest buffers:
        ...`` (``human`` formats bytes)."""
        space = f" {self.space}" if self.space else ""
        if self.kind == "compile" and self.needed is None:
            head = f"XLA compile: the program does not fit in{space or ' device memory'}"
        elif self.kind == "compile":
            head = f"XLA compile: the program needs {human(self.needed)} of {human(self.limit)}" \
                   f"{space}"
        elif self.kind == "runtime" and self.needed is None:
            head = "XLA runtime: RESOURCE_EXHAUSTED"
        elif self.kind == "runtime":
            head = f"XLA runtime: allocating {human(self.needed)} failed, {human(self.free)} free" \
                   f"{space}"
        else:
            head = "CUDA: an allocation failed" if self.needed is None else \
                f"CUDA: allocating {human(self.needed)} failed"
            if self.limit is not None:
                head += f", {human(self.free)} free of {human(self.limit)}"
        if self.over:
            head += f" ({human(self.over)} over)"
        if self.buffers:
            head += "; largest buffers: " + ", ".join(b.text(human) for b in self.buffers)
        return head


def parse_out_of_memory(text: str) -> OutOfMemoryText | None:
    """The out-of-memory error in ``text`` (an exception's message), or None when it is not
    one."""
    if not text:
        return None
    m = _COMPILE_RE.search(text)
    if m is not None:
        oom = OutOfMemoryText("compile", space=m["space"], needed=_size(m["used"]),
                              limit=_size(m["limit"]), over=_size(m["over"]))
        oom.buffers = _buffers(text)
        return oom
    m = _SPACE_RE.search(text)
    if m is not None:  # the compiler's words without the sizes
        return OutOfMemoryText("compile", space=m["space"], buffers=_buffers(text))
    m = _RUNTIME_RE.search(text)
    if m is not None:
        space = re.search(r"\(\w+_(?P<space>[A-Z]+)\d*\)", text)
        oom = OutOfMemoryText("runtime", space=space["space"].lower() if space else "",
                              needed=_size(m["asked"]), free=_size(m["free"]))
        if oom.needed is not None and oom.free is not None and oom.needed > oom.free:
            oom.over = oom.needed - oom.free
        oom.buffers = _buffers(text)
        return oom
    m = _CUDA_RE.search(text)
    if m is not None:
        oom = OutOfMemoryText("cuda", needed=_size(m["asked"]))
        total = _CUDA_TOTAL_RE.search(text) or _CUDA_OLD_RE.search(text)
        if total is not None:
            oom.limit = _size(total["total"])
            oom.free = _size(total["free"])
        return oom
    if ("RESOURCE_EXHAUSTED" in text or "Resource exhausted" in text) and \
            _MEMORY_WORDS.search(text) and not _QUOTA_WORDS.search(text):
        return OutOfMemoryText("runtime", buffers=_buffers(text))
    return None


def _buffers(text: str) -> list[Buffer]:
    out = []
    for m in _BUFFER_RE.finditer(text):
        body = m["body"]
        shape = _SHAPE_RE.search(body)
        kind = _KIND_RE.search(body)
        source = _SOURCE_RE.search(body)
        label = _LABEL_RE.search(body)
        where = (f"{source['file'].rsplit('/', 1)[-1]}:{source['line']}" if source
                 else label["label"] if label else "")
        size = _size(m["size"])
        if size is None:
            continue
        out.append(Buffer(size, re.sub(r"\{.*$", "", shape["shape"]) if shape else "",
                          kind["kind"] if kind else "", where))
        if len(out) >= MAX_BUFFERS:
            break
    return out


def one_line(oom: OutOfMemoryText, human: Any, where: str = "", graph_site: str = "",
             graph_step: int | None = None, sizes: dict[str, int] | None = None) -> str:
    """The error as one line: where it was raised, the message's sizes and largest buffers,
    and the graph it ran in (its site, step and the sizes XLA's analysis gave it)."""
    text = f"out of device memory{f' at {where}' if where else ''}: {oom.summary(human)}"
    if sizes:
        held = sizes.get("inputs", 0) + sizes.get("outputs", 0) - sizes.get("aliased", 0) + \
            sizes.get("intermediates", 0) + sizes.get("program", 0)
        step = f" (step {graph_step})" if graph_step is not None else ""
        text += (f"; the graph compiled at {graph_site or 'an unknown line'}{step} holds "
                 f"{human(held)}: inputs {human(sizes.get('inputs', 0))}, outputs "
                 f"{human(sizes.get('outputs', 0))}, aliased {human(sizes.get('aliased', 0))}, "
                 f"intermediates {human(sizes.get('intermediates', 0))}")
    return text
