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
