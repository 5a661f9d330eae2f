"""The compile bill's first step: the first step that compiled, named by its index when the
program's set-up was a step of its own (``torch_xla.compile`` ends a step before it runs)."""

from __future__ import annotations

from pathlib import Path

from lazyscope.analyze.compilebill import bill_lines, compile_bill
from tests.builders import build_run, frame

USER = (frame("/work/train.py", 68, "train_loop_fn"),)


def _run(tmp: Path, compiled_at: list[int], walls: list[float]):
    events = [{"kind": "compile", "step": s, "seconds": 0.5, "stack": USER, "key": f"g{i}"}
              for i, s in enumerate(compiled_at)]
    return build_run(tmp, steps=[{"wall_s": w, "compile_count": compiled_at.count(i)}
                                 for i, w in enumerate(walls)], events=events)


def test_the_first_step_is_step_0_when_it_compiled(tmp_path: Path) -> None:
    bill = compile_bill(_run(tmp_path / "a", [0, 0, 2], [3.0, 0.1, 0.9, 0.1]))
    assert (bill.first_step, bill.first_step_s, bill.first_step_graphs) == (0, 3.0, 2)
    assert bill_lines(bill)[0].startswith("the first step took 3.00 s: 2 graphs; ")


def test_a_set_up_step_that_compiled_nothing_is_not_the_first_step(tmp_path: Path) -> None:
    """train_decoder_only_base.py (pytorch/xla v2.9.0): step 0 is the 71 ms before the first
    ``compiled_step_fn`` call; steps 1 and 2 compiled its graphs."""
    bill = compile_bill(_run(tmp_path / "b", [1, 2, 2], [0.07, 7.1, 6.8, 2.0]))
    assert (bill.first_step, bill.first_step_s, bill.first_step_graphs) == (1, 7.1, 1)
    assert bill_lines(bill)[0].startswith("step 1, the first to compile, took 7.10 s: 1 graph; ")
