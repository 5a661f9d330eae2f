"""How lazyscope writes quantities: seconds, bytes, counts and rates, the same on every page.

Every renderer and every sentence of a finding formats through these functions (there were five
formatters of seconds). A value that was not measured is written :data:`NOT_MEASURED` (or "-" in a
table cell): never 0. Pure standard library.
"""

from __future__ import annotations

import math

NOT_MEASURED = "not measured"


def seconds(s: float | None) -> str:
    """Seconds with a unit that keeps about 3 significant digits (``1.23 s``, ``45.6 ms``,
    ``789 us``); :data:`NOT_MEASURED` for None."""
    if s is None:
        return NOT_MEASURED
    if not math.isfinite(s):
        return str(s)
    a = abs(s)
    if a >= 1:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def duration(s: float) -> str:
    """A time to wait for, rounded as a person says it: ``40 s``, ``4.1 min``, ``1.2 h``."""
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{max(1.0, s):.0f} s"


def nbytes(n: float | None) -> str:
    """Bytes in B, KiB, MiB or GiB; :data:`NOT_MEASURED` for None."""
    if n is None:
        return NOT_MEASURED
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - the loop returns


def size_given(n: int) -> str:
    """A size the user gave, said as given and as :func:`nbytes` says sizes: a whole number of
    decimal units (``--max-graph-memory 100MB``) is ``100 MB (95.4 MiB)``, anything else
    ``16.0 GiB``."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size and n % size == 0:
            binary = nbytes(n)
            if n % 1024 == 0 and float(binary.split()[0]) * 1024 ** (
                    ("B", "KiB", "MiB", "GiB").index(binary.split()[1])) == n:
                return binary  # a binary size that is also decimal (2**20 * 1000): as binary
            return f"{n // size:,} {unit} ({binary})"
    return nbytes(n)


def count(n: int | None) -> str:
    """An integer with thousands separators; "-" for None."""
    return "-" if n is None else f"{n:,}"


def times(n: int, most: int | None = None) -> str:
    """How often something happened: ``once``, ``twice``, ``3 times``; with ``most`` a range
    (``1-3 times``)."""
    if most is not None and most != n:
        return f"{n:,}-{most:,} times"
    return {1: "once", 2: "twice"}.get(n, f"{n:,} times")


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """A count with its noun in the right number: ``1 step``, ``3 steps``, ``2 graph breaks``
    (``nouns`` for an irregular plural)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def rate(per_second: float | None, unit: str) -> str:
    """A throughput (``1,678 tok/s``); "-" for None."""
    if per_second is None or not math.isfinite(per_second):
        return "-"
    return f"{per_second:,.0f} {unit}/s" if per_second >= 100 else f"{per_second:.3g} {unit}/s"


def ratio(x: float | None) -> str:
    """A ratio (``1.25x``); "-" for None."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def share(x: float | None) -> str:
    """A fraction as a percentage (``12.5%``); "-" for None."""
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"
