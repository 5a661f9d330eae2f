"""Pitfall scripts: each plants one classic PyTorch/XLA mistake on a line marked
``# lazyscope-expect: <kind>`` (the line and kind lazyscope's findings must name).

They are plain user scripts (no lazyscope import): ``lazyscope trace scenarios/pitfalls/X.py``.
"""

from __future__ import annotations

from pathlib import Path

PITFALLS_DIR = Path(__file__).resolve().parent
#: script name -> the finding kind it plants ("" for the clean script)
PITFALLS = {
    "varying_seq_len": "recompile",
    "item_per_step": "sync",
    "branch_on_value": "sync",
    "partial_batch": "recompile",
    "fallback_op": "fallback",
    "clean": "",
}


def expected_line(name: str) -> int | None:
    """The 1-based line marked ``# lazyscope-expect:`` in ``name``.py, if any."""
    lines = (PITFALLS_DIR / f"{name}.py").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if "# lazyscope-expect:" in line:
            return number
    return None
