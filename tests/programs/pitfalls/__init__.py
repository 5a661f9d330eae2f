"""Pitfall scripts: each plants one classic PyTorch/XLA mistake on a line marked
``# lazyscope-expect: <kind>`` (the line and kind lazyscope's report must name).

They are plain user scripts (no lazyscope import): ``lazyscope trace scenarios/pitfalls/X.py``.

Kinds: ``recompile`` (a finding: the site keeps compiling variants), ``recompile-note`` (a single
recompilation: a note, not a finding), ``sync`` (a host read in every step), ``fallback`` (an
aten op run on the CPU every step), ``""`` (the clean script: no finding). Every script was
checked against real torch_xla (2.9, CPU) to really show its mistake (compile counts, transfers,
``torch_xla.debug.metrics.executed_fallback_ops()``).
"""

from __future__ import annotations

from pathlib import Path

PITFALLS_DIR = Path(__file__).resolve().parent

#: the expected kinds, in the order of the marks' vocabulary
KINDS = ("recompile", "recompile-note", "sync", "fallback")

#: script name -> the kind it plants ("" for the clean script)
PITFALLS: dict[str, str] = {
    # recompile: a finding (>= 2 recompilations at one site)
    "varying_seq_len": "recompile",
    "varying_batch_rows": "recompile",
    "arange_in_step": "recompile",
    "slice_growing": "recompile",
    "dtype_cycle": "recompile",
    "cat_accumulate": "recompile",
    "full_python_int": "recompile",
    "helper_recompile": "recompile",
    "collate_pad_longest": "recompile",
    "pow_exponent_schedule": "recompile",
    # a single recompilation: a note
    "partial_batch": "recompile-note",
    "lr_special_scalar": "recompile-note",
    "cast_added_midrun": "recompile-note",
    # host syncs
    "item_per_step": "sync",
    "branch_on_value": "sync",
    "print_tensor": "sync",
    "tolist_per_step": "sync",
    "cpu_numpy": "sync",
    "fstring_float": "sync",
    "helper_sync": "sync",
    "linalg_inv": "sync",
    # CPU fallbacks
    "fallback_op": "fallback",
    "stft_op": "fallback",
    "unique_op": "fallback",
    "mask_index": "fallback",
    "mask_padding_tokens": "fallback",
    "eigvals_op": "fallback",
    "adaptive_pool": "fallback",
    "median_op": "fallback",
    "bucketize_op": "fallback",
    # no pitfall
    "clean": "",
}

#: the aten op each fallback pitfall must name (as torch_xla's counters spell it)
FALLBACK_OPS: dict[str, str] = {
    "fallback_op": "aten::histc",
    "stft_op": "aten::_fft_r2c",
    "unique_op": "aten::_unique2",
    "mask_index": "aten::nonzero",
    "mask_padding_tokens": "aten::nonzero",
    "eigvals_op": "aten::linalg_eig",
    "adaptive_pool": "aten::_adaptive_avg_pool2d",
    "median_op": "aten::median",
    "bucketize_op": "aten::bucketize.Tensor",
}


def script(name: str) -> Path:
    """The path of pitfall ``name``."""
    return PITFALLS_DIR / f"{name}.py"


def expected_line(name: str) -> int | None:
    """The 1-based line marked ``# lazyscope-expect:`` in ``name``.py, if any."""
    lines = script(name).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if "# lazyscope-expect:" in line:
            return number
    return None


def expected_kind(name: str) -> str:
    """The kind written after ``# lazyscope-expect:`` in ``name``.py ("" if unmarked)."""
    for line in script(name).read_text(encoding="utf-8").splitlines():
        if "# lazyscope-expect:" in line:
            return line.split("# lazyscope-expect:", 1)[1].split()[0]
    return ""


def judge(name: str, report: dict) -> tuple[str, str]:
    """``(reported, verdict)`` for pitfall ``name`` from its ``lazyscope report --format json``.

    ``reported``: the ``file:line`` of the findings (or, for a ``recompile-note``, of the
    recompile notes), ``-`` when none. ``verdict``: ``exact`` when every finding is of the
    planted kind at the marked line and there is at least one (for a note: no finding at all and
    a recompile note at the line; for the clean script: no finding); else what went wrong."""
    kind, line = PITFALLS[name], expected_line(name)
    path = str(script(name))
    findings = report.get("findings", [])
    if kind == "recompile-note":
        shown = [n for n in report.get("notes", []) if n["kind"] == "recompile"]
    else:
        shown = findings
    reported = ", ".join(sorted({f"{Path(f['file']).name}:{f['line']}" for f in shown})) or "-"
    if report.get("status") != "ok":
        return reported, f"run {report.get('status')}"
    if not kind:
        return reported, "exact" if not findings else "false alarm"
    if kind == "recompile-note" and findings:
        return reported, "finding, expected a note"
    want = "recompile" if kind == "recompile-note" else kind
    if not shown:
        return reported, "missed"
    wrong_kind = [f["kind"] for f in shown if f["kind"] != want]
    if wrong_kind:
        return reported, f"also {', '.join(sorted(set(wrong_kind)))}"
    if any((f["file"], f["line"]) != (path, line) for f in shown):
        return reported, "wrong line"
    return reported, "exact"
