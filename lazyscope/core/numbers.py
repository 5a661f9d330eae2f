"""Every number a user or the environment hands lazyscope, read by one parser.

Options (``--max-len``, ``--timeout``, ``--max-graph-memory``), environment variables
(``LAZYSCOPE_UPLOAD_SECONDS``, ``CLOUD_TPU_TASK_ID``) and the lines of a lengths file all go
through :func:`parse_int`, :func:`parse_float` or :func:`parse_size`, which accept what a person
means and refuse the rest with one line naming where the value came from:

* digits are ASCII ``0``-``9`` only: Python's ``int()`` also takes full-width (``１２``),
  Arabic-Indic (``١٢``) or superscript digits, or fails on them with an error no caller
  expected; here each is one clear refusal;
* at most :data:`MAX_DIGITS` digits: a 400-digit number is refused before it becomes an
  integer nothing can hold (or a float that is infinite);
* ``nan`` and ``inf`` are refused wherever a finite value is meant (every comparison with NaN
  is false: a limit of NaN would pass anything; a timeout of NaN would never end);
* each caller states its bounds (a negative host index, a timeout of 10^9 s): outside them is
  one line saying the range.

A refusal is a :class:`BadNumber`: a :class:`~lazyscope.core.errors.UsageError` (exit 2) and a
``ValueError`` (callers that read numbers from files catch that). The command line's options
take them through :class:`lazyscope.commands.common.Whole` and ``Real``. Pure standard
library.
"""

from __future__ import annotations

import math
import re
from typing import Any

from lazyscope.core.errors import UsageError, one_line

#: the most digits a number may have (10^30 bytes is a million yottabytes)
MAX_DIGITS = 30
#: the longest wait or period a user may ask for (about 31 years): whatever is meant, and
#: still a timeout every clock and lock takes
MAX_SECONDS = 1e9

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)", re.ASCII)
_SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
               "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class BadNumber(UsageError, ValueError):
    """A number lazyscope was given that it cannot take (exit 2); ``str()`` is the line."""


def _shown(text: str) -> str:
    """The value as the message quotes it (a 400-digit number by its length)."""
    text = one_line(text.strip(), 40)
    return repr(text)


def _refuse(what: str, text: str, why: str) -> BadNumber:
    head = f"{what}: " if what else ""
    return BadNumber(f"{head}{_shown(text)} {why}")


def _digits(text: str) -> int:
    return sum(ch.isdigit() for ch in text)


def _not_ascii(text: str) -> bool:
    return any(ch.isdigit() and not ("0" <= ch <= "9") for ch in text)


def _num(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) or float(x).is_integer() and abs(x) < 1e15 \
        else f"{x:g}"


def _range_text(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"from {_num(minimum)} to {_num(maximum)}"
    if minimum is not None:
        return f"at least {_num(minimum)}"
    return f"at most {_num(maximum)}"  # type: ignore[arg-type]


def _check_range(value: float, what: str, text: str, minimum: float | None,
                 maximum: float | None, above: float | None = None) -> None:
    if above is not None and not value > above:
        raise _refuse(what, text, f"is not above {_num(above)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _refuse(what, text, f"is out of range: {_range_text(minimum, maximum)}")


def _malformed(what: str, text: str, kind: str) -> BadNumber:
    stripped = text.strip()
    if not stripped:
        return BadNumber(f"{what + ': ' if what else ''}an empty value is not {kind}")
    if _not_ascii(stripped):
        return _refuse(what, text, f"is not {kind}: write it with the digits 0-9")
    word = stripped.lower().lstrip("+-")
    if word == "nan":
        return _refuse(what, text, "is not a number")
    if word in ("inf", "infinity"):
        return _refuse(what, text, f"is not {kind}: a finite value is needed")
    return _refuse(what, text, f"is not {kind}")


def parse_int(text: Any, what: str = "", *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """A whole number written with the digits 0-9 (a sign allowed), within the bounds."""
    text = str(text)
    if not _INT.fullmatch(text.strip()):
        raise _malformed(what, text, "a whole number")
    if _digits(text) > MAX_DIGITS:
        bounds = "" if minimum is None and maximum is None else \
            f" ({_range_text(minimum, maximum)})"
        raise _refuse(what, text, f"has {_digits(text)} digits: too large{bounds}")
    value = int(text.strip())
    _check_range(value, what, text, minimum, maximum)
    return value


def parse_float(text: Any, what: str = "", *, minimum: float | None = None,
                maximum: float | None = None, above: float | None = None,
                infinite: bool = False) -> float:
    """A finite decimal number (``0.5``, ``2``, ``1e-3``) written with the digits 0-9, within
    the bounds (``above``: strictly greater than it). NaN is refused, and infinity (``inf``, or
    a number too large for a float) unless ``infinite`` (a limit that never binds)."""
    text = str(text)
    stripped = text.strip()
    if infinite and stripped.lower().lstrip("+") in ("inf", "infinity"):
        value = math.inf
    elif not _FLOAT.fullmatch(stripped):
        raise _malformed(what, text, "a number")
    else:
        mantissa = re.split(r"[eE]", stripped)[0]
        if _digits(mantissa) > MAX_DIGITS:
            raise _refuse(what, text, f"has {_digits(mantissa)} digits: too large")
        value = float(stripped)
        if not math.isfinite(value) and not infinite:
            raise _refuse(what, text, "is too large: a finite value is needed")
    _check_range(value, what, text, minimum, maximum, above)
    return value


def parse_size(text: Any, what: str = "") -> int:
    """Bytes from ``1MB`` (10**6), ``16GiB`` (2**34), ``512K`` (XLA's K: 2**10) or a bare
    number of bytes (digits 0-9, at most :data:`MAX_DIGITS` of them)."""
    text = str(text)
    m = _SIZE.fullmatch(text.strip())
    if m is None or m[2].upper() not in _SIZE_UNITS:
        if _not_ascii(text) or text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise _malformed(what, text, "a size")
        raise _refuse(what, text, "is not a size (a number of bytes, or with a unit: 1MB, "
                      "16GiB)")
    if _digits(m[1]) > MAX_DIGITS:
        raise _refuse(what, text, f"has {_digits(m[1])} digits: too large to be a size")
    whole, _, frac = m[1].partition(".")
    scale = _SIZE_UNITS[m[2].upper()]
    # exact in integers: a float would round sizes past 2^53 bytes
    value = int(whole) * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
    return value


def parse_share(text: Any, what: str = "") -> float:
    """A share of a whole given as a percentage (``80%``): ``0.8``; above 0, at most 100%."""
    text = str(text)
    body = text.strip()
    if not body.endswith("%"):
        raise _refuse(what, text, "is not a percentage (80%)")
    try:
        value = parse_float(body[:-1], what) / 100
    except BadNumber:
        raise _refuse(what, text, "is not a share of the device (80%)") from None
    if not 0 < value <= 1:
        raise _refuse(what, text, "is not a share of the device between 0% and 100%")
    return value


def parse_size_or_share(text: Any, what: str = "") -> tuple[int | None, float | None]:
    """``(bytes, None)`` for a size, ``(None, share)`` for a share of the device (``80%``)."""
    if str(text).strip().endswith("%"):
        return None, parse_share(text, what)
    return parse_size(text, what), None
