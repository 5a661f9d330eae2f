"""What ran on the CPU? Per ``aten::`` op without an XLA lowering: executions (from the per-step
counters, exact), the steps it ran in, and its user call sites (from ``fallback`` events, which
the collector samples in warm-up and after an unsited fallback). The time is estimated from the
sampled calls' wall time times the executions. Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lazyscope.model import Run, Site

#: op base name -> a concrete replacement
REPLACEMENTS = {
    "histc": "count with lowered ops: ((x[..., None] >= edges[:-1]) & (x[..., None] < edges[1:]))"
             ".sum(...), or compute the histogram outside the step",
    "bucketize": "compare against the boundaries with lowered ops: (x[..., None] >= b).sum(-1)",
    "searchsorted": "compare against the sorted values with lowered ops: "
                    "(x[..., None] >= s).sum(-1)",
    "median": "use torch.sort or torch.kthvalue (lowered) instead of median",
    "nanmedian": "mask NaNs and use torch.kthvalue (lowered)",
    "_unique2": "avoid torch.unique in the step (data-dependent size); use a fixed-size mask",
    "mode": "compute the mode outside the step or with one-hot counts and argmax",
}


@dataclass
class FallbackOp:
    op: str
    count: int = 0
    steps: list[int] = field(default_factory=list)
    sites: dict[tuple[str, int, str], int] = field(default_factory=dict)
    sampled_calls: int = 0
    sampled_seconds: float = 0.0
    fastest_call_s: float | None = None  # the cheapest sampled step's mean call time

    @property
    def base(self) -> str:
        return self.op.split("::", 1)[-1].split(".", 1)[0]

    @property
    def site(self) -> Site | None:
        if not self.sites:
            return None
        (file, line, function), _ = max(self.sites.items(), key=lambda kv: kv[1])
        return Site(file, line, function)

    @property
    def seconds(self) -> float:
        """Estimated CPU time: the fastest sampled step's mean call time x executions (the
        first call of an op also pays one-off costs, so the mean of all samples overstates)."""
        if self.fastest_call_s is None:
            return 0.0
        return self.fastest_call_s * self.count

    def detail(self) -> str:
        return (f"{self.op} ran on the CPU {self.count} time(s) in {len(self.steps)} step(s): "
                "its inputs go to the host and its result back every time")

    def fix(self) -> str:
        return (f"replace {self.op} with ops torch_xla lowers: "
                + REPLACEMENTS.get(self.base.rstrip("_"), "see torch_xla's lowered op list, or "
                                   "move the computation out of the step"))


def fallback_ops(run: Run) -> list[FallbackOp]:
    """One entry per fallback op, the most executed first."""
    ops: dict[str, FallbackOp] = {}
    for step in run.all_steps():
        for op, n in step.fallback_ops.items():
            entry = ops.setdefault(op, FallbackOp(op))
            entry.count += n
            if step.index not in entry.steps:
                entry.steps.append(step.index)
    for event in run.events:
        if event.kind != "fallback":
            continue
        op = str(event.data.get("op", ""))
        entry = ops.setdefault(op, FallbackOp(op))
        calls = int(event.data.get("calls", 1) or 1)
        if event.site is not None:
            key = (event.site.file, event.site.line, event.site.function)
            entry.sites[key] = entry.sites.get(key, 0) + calls
        entry.sampled_calls += calls
        entry.sampled_seconds += event.seconds
        mean = event.seconds / calls
        if entry.fastest_call_s is None or mean < entry.fastest_call_s:
            entry.fastest_call_s = mean
    return sorted(ops.values(), key=lambda o: (-o.count, o.op))
