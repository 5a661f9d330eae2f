"""The XLA backend's per-barrier work, which runs at every step of the program: which sync
ends a step (decided once per call site), and the metric deltas (pure logic: a fake metrics
module stands in for torch_xla's)."""

from __future__ import annotations

from typing import Any

from lazyscope.backends.xla import barrier as xla
from lazyscope.backends.xla.causes import barrier_source, is_program_barrier
from lazyscope.backends.xla.metrics import Metrics
from lazyscope.model import Frame

SP = "/venv/lib/python3.11/site-packages/"


def sync() -> tuple[bool, str]:
    """Stands in for the wrapped torch_xla.sync: its caller's site decides."""
    return xla.barrier_site(1)


def library(path: str, source: str) -> dict[str, Any]:
    """Functions defined in a file that looks like an installed package's."""
    scope: dict[str, Any] = {}
    exec(compile(source, SP + path, "exec"), scope)  # noqa: S102 - test fixture code
    return scope


LOADER = library("torch_xla/distributed/parallel_loader.py", "def next(sync):\n    return sync()\n")
XM = library("torch_xla/core/xla_model.py",
             "def mark_step(sync):\n    return sync()\n\n"
             "def mesh_reduce(sync):\n    return sync()\n")


def old_decision(frames_from: Any) -> tuple[bool, str]:
    """The decision from Frame objects, as the wrapper made it before the cache."""
    frames = [Frame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name,
                    xla.is_library_file(f.f_code.co_filename)) for f in frames_from]
    return is_program_barrier(frames), barrier_source(frames)


def test_each_call_site_is_decided_once_and_as_before() -> None:
    xla._BARRIER_SITES.clear()
    for _ in range(3):  # the first round decides, the others are answered from the cache
        assert sync() == (True, "own")  # torch_xla.sync() in the loop
        assert LOADER["next"](sync) == (True, "loader")
        assert XM["mark_step"](sync) == (True, "own")
        assert XM["mesh_reduce"](sync) == (False, "own")  # torch_xla's own bookkeeping
        assert len(xla._BARRIER_SITES) == 4
    assert sync() == (True, "own")  # another line of the loop is another site
    assert len(xla._BARRIER_SITES) == 5
    for key, decision in xla._BARRIER_SITES.items():
        codes = key[::2]
        assert all(isinstance(line, int) for line in key[1::2])
        assert not xla.is_library_file(codes[-1].co_filename)  # keys end at the user's frame
        assert decision[0] == (codes[0].co_name != "mesh_reduce")


def test_the_cached_decision_equals_the_one_from_frames() -> None:
    import sys

    def site() -> tuple[tuple[bool, str], tuple[bool, str]]:
        f = sys._getframe(1)
        frames = []
        while f is not None:
            frames.append(f)
            if not xla.is_library_file(f.f_code.co_filename):
                break
            f = f.f_back
        return xla.barrier_site(1), old_decision(frames)

    for call in (lambda: site(), lambda: LOADER["next"](site), lambda: XM["mark_step"](site),
                 lambda: XM["mesh_reduce"](site)):
        cached, direct = call()
        assert cached == direct


class FakeMet:
    """torch_xla.debug.metrics' reading API over plain values; counts the reads."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[tuple[float, float]]] = {}
        self.counters: dict[str, int] = {}
        self.reads: list[str] = []

    def add(self, name: str, *values: float) -> None:
        self.metrics.setdefault(name, []).extend((1.0, v) for v in values)

    def metric_data(self, name: str) -> Any:
        self.reads.append(name)
        samples = self.metrics.get(name)
        if samples is None:
            return None
        return len(samples), float(sum(v for _, v in samples)), tuple(samples[-32:])

    def executed_fallback_ops(self) -> list[str]:
        return list(self.counters)

    def counter_value(self, name: str) -> int | None:
        return self.counters.get(name)


def test_metric_deltas_count_only_what_happened_since_the_last_barrier() -> None:
    met = FakeMet()
    met.add("CompileTime", 5e9)
    met.add("ExecuteTime", 1e9, 1e9)
    met.add("TransferToDeviceTime", 1e6)
    met.add("OutboundData", 4096)
    met.counters["aten::nonzero"] = 3
    reader = Metrics(met)  # what ran before the trace is the baseline
    values, samples, fallbacks = reader.take()
    assert values["compile_count"] == values["execute_count"] == values["to_device_count"] == 0
    assert samples == [] and fallbacks == {}

    met.add("ExecuteTime", 2e9)
    met.add("CompileTime", 3e9)
    met.add("TransferToDeviceTime", 2e6)
    met.add("OutboundData", 100)
    met.add("EagerOpExecuteTime", 1e9)  # a metric that appears during the run counts from 0
    met.counters["aten::nonzero"] = 5
    values, samples, fallbacks = reader.take()
    assert values["compile_count"] == 1 and values["compile_s"] == 3.0
    assert samples[-1] == (1.0, 3e9)
    assert values["execute_count"] == 2 and values["execute_s"] == 3.0
    assert values["to_device_count"] == 1 and values["to_device_bytes"] == 100
    assert values["to_device_s"] == 2e-3
    assert fallbacks == {"aten::nonzero": 2}

    met.reads.clear()
    values, samples, fallbacks = reader.take()
    assert not any(v for k, v in values.items()) and samples == [] and fallbacks == {}
    # no transfer counted: the byte totals are not read at a steady barrier
    assert "OutboundData" not in met.reads and "InboundData" not in met.reads


def test_bytes_sampled_before_their_transfer_is_counted_are_not_lost() -> None:
    met = FakeMet()
    reader = Metrics(met)
    met.add("InboundData", 64)  # torch_xla adds the bytes sample first, the timing at exit
    values, _, _ = reader.take()
    assert values["from_device_count"] == 0 and values["from_device_bytes"] == 0.0
    met.add("TransferFromDeviceTime", 1e5)
    values, _, _ = reader.take()
    assert values["from_device_count"] == 1 and values["from_device_bytes"] == 64
    met.add("InboundData", 8)
    values, _, _ = reader.take(everything=True)  # the end of the run reads them regardless
    assert values["from_device_bytes"] == 8


def test_the_site_cache_is_bounded() -> None:
    xla._BARRIER_SITES.clear()
    xla._BARRIER_SITES.update({(i,): (True, "own") for i in range(4097)})
    assert sync() == (True, "own")
    assert len(xla._BARRIER_SITES) == 1
    assert sync() == (True, "own")  # the next call still decides right
    assert len(xla._BARRIER_SITES) == 2
