"""The stall clock of CUDA host syncs (lazyscope.backends.pytorch.stalls), on the CPU.

A sync warning raised inside a timed tensor read is recorded when the read returns, with the
read's duration; one raised elsewhere is recorded at once with 0 s. The wrappers change nothing a
program sees: the original methods come back on ``remove()``, and ``torch.compile`` traces a
function that reads values exactly as it does without them (same graphs, same breaks)."""

from __future__ import annotations

import time

import pytest

from lazyscope.backends.pytorch.stalls import TIMED_READS, StallTimer

torch = pytest.importorskip("torch")


class FakeTensor:
    """Stands for a CUDA tensor: ``item`` waits, then torch's warning arrives (as it does,
    when the C++ call returns), then the value."""

    timer: StallTimer | None = None

    def item(self) -> float:
        time.sleep(0.05)
        assert self.timer is not None
        self.timer.sync("called a synchronizing CUDA operation", ("item-site",))
        return 1.0

    def tolist(self) -> list[float]:
        return [self.item()]  # a read inside a read: one wait, one event


def _timer() -> tuple[StallTimer, list[tuple[str, object, float]]]:
    got: list[tuple[str, object, float]] = []
    return StallTimer(lambda m, s, t: got.append((m, s, t))), got


def test_a_sync_inside_a_timed_read_gets_the_reads_duration() -> None:
    timer, got = _timer()
    FakeTensor.timer = timer
    timer.install(FakeTensor)
    try:
        assert FakeTensor().item() == 1.0
        assert FakeTensor().tolist() == [1.0]
    finally:
        timer.remove()
    assert [s for _, s, _ in got] == [("item-site",), ("item-site",)]
    assert all(0.04 < t < 1.0 for _, _, t in got), got


def test_a_sync_outside_any_timed_read_is_recorded_at_once_without_a_stall() -> None:
    timer, got = _timer()
    timer.sync("called a synchronizing CUDA operation", ("nonzero-site",))
    assert got == [("called a synchronizing CUDA operation", ("nonzero-site",), 0.0)]


def test_remove_puts_back_every_original_method_of_torch_tensor() -> None:
    before = {name: getattr(torch.Tensor, name) for name in TIMED_READS}
    own = {name for name in TIMED_READS if name in vars(torch.Tensor)}
    timer, got = _timer()
    timer.install(torch.Tensor)
    assert all(getattr(torch.Tensor, name) is not before[name] for name in TIMED_READS)
    t = torch.arange(3.0)
    assert t.tolist() == [0.0, 1.0, 2.0] and t[1].item() == 1.0 and bool(t[1])
    assert int(t[2]) == 2 and float(t[2]) == 2.0 and t.to(torch.int64).dtype == torch.int64
    timer.remove()
    assert {name: getattr(torch.Tensor, name) for name in TIMED_READS} == before
    assert {name for name in TIMED_READS if name in vars(torch.Tensor)} == own
    assert got == []  # no CUDA here: nothing synchronised


def _graphs_of(fn, x) -> tuple[int, int, float]:
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    out = torch.compile(fn, backend="aot_eager")(x)
    return (int(counters["stats"]["unique_graphs"]), sum(counters["graph_break"].values()),
            float(out))


def test_torch_compile_traces_value_reads_the_same_with_the_wrappers() -> None:
    def step(x):
        y = (x * 2).sum()
        host = y.item()  # a graph break with or without the wrappers
        return (x.cpu() + host).sum()

    x = torch.randn(8)
    plain = _graphs_of(step, x)
    timer, got = _timer()
    timer.install(torch.Tensor)
    try:
        wrapped = _graphs_of(step, x)
    finally:
        timer.remove()
    assert wrapped == plain
    assert plain[1] >= 1  # the .item() break is there: the comparison means something


def test_compiled_code_that_moves_values_to_the_host_still_compiles_in_one_graph() -> None:
    def step(x):
        y = (x * 2).to(torch.float64).cpu()
        return y.to("cpu", torch.float32) + 1

    timer, got = _timer()
    timer.install(torch.Tensor)
    try:
        torch._dynamo.reset()
        out = torch.compile(step, backend="aot_eager", fullgraph=True)(torch.ones(4))
    finally:
        timer.remove()
    assert out.tolist() == [3.0] * 4 and got == []


def test_a_sync_warning_is_placed_at_the_read_not_in_the_warnings_module() -> None:
    """torch reports a CUDA sync through ``warnings``; the handler's stack starts above the
    warnings module and lazyscope's own frames (the stall clock), at the line that read."""
    import warnings

    from lazyscope.backends.pytorch.collector import _warning_machinery
    from lazyscope.model.ownership import capture_stack

    seen: list = []

    def show(message, category, filename, lineno, file=None, line=None):
        seen.append(capture_stack(1, above=_warning_machinery))

    def read_the_value() -> None:
        warnings.warn("called a synchronizing CUDA operation", stacklevel=1)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        read_the_value()
    (stack,) = seen
    assert not stack[0].file.endswith("warnings.py")
    assert (stack[0].file, stack[0].function) == (__file__, "read_the_value")
