"""Pitfall scripts: each plants one classic PyTorch/XLA mistake on a line marked
``# lazyscope-expect: <kind>`` (the line and kind lazyscope's report must name).

They are plain user scripts (no lazyscope import): ``lazyscope trace scenarios/pitfalls/X.py``.

Kinds: ``recompile`` (a finding: graphs keep being made and are not reused), ``recompile-note``
(a one-off recompilation after warm-up: a note, not a finding), ``reuse`` (a bounded set of
variants, each reused: a ``reuse`` note and no finding), ``sync`` (a host read in every step),
``fallback`` (an aten op run on the CPU every step), ``""`` (the clean script: no finding). Every script was
checked against real torch_xla (2.9, CPU) to really show its mistake (compile counts, transfers,
``torch_xla.debug.metrics.executed_fallback_ops()``).
"""

from __future__ import annotations

from pathlib import Path

PITFALLS_DIR = Path(__file__).resolve().parent

#: the expected kinds, in the order of the marks' vocabulary
KINDS = ("recompile", "recompile-note", "sync", "fallback", "reuse")

#: script name -> the kind it plants ("" for the clean script)
PITFALLS: dict[str, str] = {
    # recompile: a finding (>= 2 recompilations at one site)
    "varying_seq_len": "recompile",
    "varying_batch_rows": "recompile",
    "arange_in_step": "recompile",
    "slice_growing": "recompile",
    "cat_accumulate": "recompile",
    "cat_grown_read_elsewhere": "recompile",
    "eval_accumulate_predictions": "recompile",
    "full_python_int": "recompile",
    "helper_recompile": "recompile",
    "collate_pad_longest": "recompile",
    "pow_exponent_schedule": "recompile",
    "interpolate_scale_schedule": "recompile",
    "spmd_varying_length": "recompile",
    "compile_attribute_guard": "recompile",
    "openxla_varying_length": "recompile",
    # a data-dependent size: a recompile, and the op that makes it runs on the CPU
    "data_dependent_size": "recompile, fallback",
    # a single recompilation: a note
    "partial_batch": "recompile-note",
    "lr_special_scalar": "recompile-note",
    "cast_added_midrun": "recompile-note",
    # a bounded set of variants, each reused: said, not a finding
    "dtype_cycle": "reuse",
    # host syncs
    "item_per_step": "sync",
    "branch_on_value": "sync",
    "print_tensor": "sync",
    "tolist_per_step": "sync",
    "cpu_numpy": "sync",
    "fstring_float": "sync",
    "helper_sync": "sync",
    "linalg_inv": "sync",
    "mesh_reduce_per_step": "sync",
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
    "backward_fallback": "fallback",
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
    "backward_fallback": "aten::upsample_bilinear2d_backward",
}


#: pitfalls that run on another backend than xla (``lazyscope trace --backend B``)
BACKEND: dict[str, str] = {"compile_attribute_guard": "compile"}


def trace_args(name: str) -> list[str]:
    """lazyscope's own options to trace pitfall ``name`` with (before the script)."""
    backend = BACKEND.get(name)
    return ["--backend", backend] if backend else []


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
    """The kind(s) written after ``# lazyscope-expect:`` in ``name``.py ("" if unmarked;
    several are comma-separated: ``recompile, fallback``)."""
    for line in script(name).read_text(encoding="utf-8").splitlines():
        if "# lazyscope-expect:" in line:
            return line.split("# lazyscope-expect:", 1)[1].strip()
    return ""


def judge(name: str, report: dict) -> tuple[str, str]:
    """``(reported, verdict)`` for pitfall ``name`` from its ``lazyscope report --format json``.

    ``reported``: the ``file:line`` of the findings (or, for a ``recompile-note``, of the
    recompile notes), ``-`` when none. ``verdict``: ``exact`` when every finding is of the
    planted kind at the marked line and there is at least one (for a note: no finding at all and
    a recompile note at the line; for the clean script: no finding); else what went wrong."""
    return judge_report(PITFALLS[name], expected_line(name), str(script(name)), report)


def judge_report(kind: str, line: int | None, path: str, report: dict) -> tuple[str, str]:
    """:func:`judge` of a program planting ``kind`` at ``path:line`` (any program directory)."""
    findings = report.get("findings", [])
    if kind in ("recompile-note", "reuse"):
        want_note = "recompile" if kind == "recompile-note" else "reuse"
        shown = [n for n in report.get("notes", []) if n["kind"] == want_note]
    else:
        shown = findings
    reported = ", ".join(sorted({f"{Path(f['file']).name}:{f['line']}" for f in shown})) or "-"
    if report.get("status") != "ok":
        return reported, f"run {report.get('status')}"
    if not kind:
        return reported, "exact" if not findings else "false alarm"
    if kind in ("recompile-note", "reuse") and findings:
        return reported, "finding, expected a note"
    want = {{"recompile-note": "recompile"}.get(k.strip(), k.strip()) for k in kind.split(",")}
    if not shown:
        return reported, "missed"
    wrong_kind = [f["kind"] for f in shown if f["kind"] not in want]
    if wrong_kind:
        return reported, f"also {', '.join(sorted(set(wrong_kind)))}"
    missing = want - {f["kind"] for f in shown}
    if missing:
        return reported, f"missed {', '.join(sorted(missing))}"
    if any((f["file"], f["line"]) != (path, line) for f in shown):
        return reported, "wrong line"
    return reported, "exact"
