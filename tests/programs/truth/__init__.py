"""Programs of issue 46 ("diagnostic truth, round 5"), each planting one class of mistake the
earlier rounds got wrong, marked like the pitfalls (``# lazyscope-expect: <kind>`` on the line
the report must name; no mark: no finding). Run by tests/integration/test_truth.py.

Not in the table (they run themselves, with arguments or under pytest): ``guard_after_device``
(a guard entered after ``model.to(dev)``), ``guard_cat_preds`` (a guard around
``torch.cat(preds)``) and ``guarded_order`` (two guarded tests whose verdicts must not depend on
the order they run in)."""

from __future__ import annotations

from pathlib import Path

TRUTH_DIR = Path(__file__).resolve().parent

#: program -> the kind(s) it plants ("" for a program that must get no finding)
TRUTH: dict[str, str] = {
    # a loop that ends no step: one graph compiled at the read after it
    "no_barrier_loop": "no_barrier",
    # a list of device tensors stacked / concatenated every step: novelty by site
    "stack_history": "recompile",
    "cat_feats": "recompile",
    # sizes made on the device, named where they are made, fixed as sizes
    "arange_helper": "recompile",
    "randperm_n": "recompile",
    "interpolate_method": "recompile",
    "nonzero_select": "recompile, fallback",
    # Python floats baked in as constants, fixed as constants
    "layer_norm_eps": "recompile",
    "pow_exponent_config": "recompile",
    "lr_to_zero": "recompile-note",
    "compiled_global": "recompile-note",
    # one change that also takes another Python branch
    "branch_on_shape": "recompile-note",
    # a host read inside a library, made by the user's line that hands it the tensor
    "tqdm_postfix": "sync",
    # a bounded set of variants, each reused: no memory finding, no recompile finding
    "grad_accumulation": "",
    "bucketed_warmup": "",
}

#: programs traced on another backend than xla
BACKEND: dict[str, str] = {"compiled_global": "compile"}


def script(name: str) -> Path:
    return TRUTH_DIR / f"{name}.py"


def expected_line(name: str, mark: str = "# lazyscope-expect:") -> int | None:
    """The 1-based line carrying ``mark`` in ``name``.py, if any."""
    for number, line in enumerate(script(name).read_text(encoding="utf-8").splitlines(), 1):
        if mark in line:
            return number
    return None
