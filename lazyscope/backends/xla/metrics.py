"""torch_xla's metrics, read as what changed per step: compilations, executions (graph,
replicated (SPMD) and eager-op), transfers both ways with their bytes, and CPU-fallback op
executions; and torch_xla's own counters of a whole run, to set beside lazyscope's."""

from __future__ import annotations

from typing import Any

#: torch_xla's metrics of executions: graph executions, the replicated executions of SPMD /
#: multi-device programs and eager mode's op executions
EXECUTE_METRICS = ("ExecuteTime", "ExecuteReplicatedTime", "EagerOpExecuteTime")

#: ``info["runtime_counts"]``, shown by the report beside lazyscope's counts)
RUNTIME_COUNTERS = ("CompileTime", "EagerOpCompileTime", "ExecuteTime", "ExecuteReplicatedTime",
                    "EagerOpExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime")


def runtime_counts(met: Any) -> dict[str, int]:
    """How many samples each of :data:`RUNTIME_COUNTERS` holds now (absent ones: 0)."""
    out = {}
    for name in RUNTIME_COUNTERS:
        data = met.metric_data(name)
        out[name] = int(data[0]) if data else 0
    return out


class Metrics:
    """torch_xla's cumulative metrics, turned into what changed since the last :meth:`take`.

    This runs at every step barrier, on the thread that feeds the device (where every
    microsecond is the program's; on XLA:CPU it also takes the cores the step executes on): one
    binding call per metric, the byte totals of a transfer direction read only when its
    transfer count moved (torch_xla samples both in the same function), the compile samples
    kept only when a compilation happened, no intermediate dicts."""

    __slots__ = ("_data", "_met", "_seen", "_fallbacks")

    def __init__(self, met: Any, metric_data: Any = None):
        self._met = met
        #: torch_xla's binding itself (met.metric_data is a Python function around it)
        self._data = metric_data or met.metric_data
        #: metric -> (samples, accumulated value) at the last take
        self._seen: dict[str, tuple[int, float]] = {}
        self._fallbacks: dict[str, int] = {}
        self.take(everything=True)  # the baseline: what ran before the trace is not the run's

    def _delta(self, name: str) -> tuple[int, float, Any]:
        data = self._data(name)
        if data is None:
            return 0, 0.0, None
        total, acc, samples = data
        seen = self._seen.get(name)
        if seen is None:
            self._seen[name] = (total, acc)
            return total, acc, samples
        if total == seen[0]:
            return 0, 0.0, None
        self._seen[name] = (total, acc)
        return total - seen[0], acc - seen[1], samples

    def _sum(self, names: tuple[str, ...]) -> tuple[int, float]:
        count, acc = 0, 0.0
        for name in names:
            n, v, _ = self._delta(name)
            count += n
            acc += v
        return count, acc

    def take(self, everything: bool = False) -> tuple[dict[str, Any], list[tuple[float, float]],
                                                     dict[str, int]]:
        """(step values of the counters, the kept CompileTime samples when something compiled,
        fallback op -> executions) since the last take; ``everything``: the byte totals too
        even when no transfer was counted (the end of the run)."""
        compiles, compile_ns, samples = self._delta("CompileTime")
        n, v, _ = self._delta("EagerOpCompileTime")
        executions, execute_ns = self._sum(EXECUTE_METRICS)
        to_n, to_ns, _ = self._delta("TransferToDeviceTime")
        from_n, from_ns, _ = self._delta("TransferFromDeviceTime")
        values = {
            "compile_count": compiles + n,
            "compile_s": (compile_ns + v) / 1e9,
            "execute_count": executions,
            "execute_s": execute_ns / 1e9,
            "to_device_count": to_n,
            "to_device_bytes": self._delta("OutboundData")[1] if to_n or everything else 0.0,
            "to_device_s": to_ns / 1e9,
            "from_device_count": from_n,
            "from_device_bytes": self._delta("InboundData")[1] if from_n or everything else 0.0,
            "from_device_s": from_ns / 1e9,
        }
        fallbacks: dict[str, int] = {}
        ops = self._met.executed_fallback_ops()
        if ops:
            counter_value, last = self._met.counter_value, self._fallbacks
            for op in ops:
                total = int(counter_value(op) or 0)
                if total > last.get(op, 0):
                    fallbacks[op] = total - last.get(op, 0)
                    last[op] = total
        return values, list(samples) if compiles and samples else [], fallbacks
