"""The watch window's pure parts: op names, and the trampoline that keeps the user's line the
innermost frame of every torch call it makes (pure Python: no torch_xla)."""

from __future__ import annotations

import sys
import warnings

from lazyscope.backends.xla.watch import forward_name, op_base, trampoline
from lazyscope.model import Frame
from lazyscope.model.ownership import bound_stack


def _where_called() -> tuple[str, int, str]:
    f = sys._getframe(1)  # the frame that called this function: the trampoline's
    return f.f_code.co_filename, f.f_lineno, f.f_code.co_name


def user_step() -> tuple[tuple[str, int, str], int]:
    call, line = trampoline(sys._getframe(0)), sys._getframe(0).f_lineno
    return call(_where_called, (), {}), line


def test_the_trampoline_frame_reads_as_the_calling_line() -> None:
    where, line = user_step()
    assert where == (__file__, line, "user_step")
    # cached per calling line: the same function object again
    assert trampoline(sys._getframe(0)) is trampoline(sys._getframe(0))


def test_the_trampoline_passes_arguments_and_results_and_keeps_the_callers_globals() -> None:
    call = trampoline(sys._getframe(0))
    assert call(lambda a, b=0: a + b, (2,), {"b": 3}) == 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(warnings.warn, ("careful",), {"stacklevel": 1})
    assert caught and caught[0].filename == __file__  # attributed to this module's line


def test_a_repeated_frame_is_kept_once() -> None:
    lib = Frame("/site-packages/torch/overrides.py", 10, "handle", True)
    user = Frame("/work/train.py", 7, "main", False)
    outer = Frame("/work/train.py", 30, "<module>", False)
    assert bound_stack([user, lib, user, outer]) == (user, outer)


def test_op_names() -> None:
    assert op_base("aten::median.dim_values") == "median"
    assert forward_name("aten::_adaptive_avg_pool2d_backward") == "adaptive_avg_pool2d"
    assert forward_name("aten::add") is None
