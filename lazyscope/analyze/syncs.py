"""Where did Python wait for the device? Aggregate ``sync`` events (value reads of XLA tensors:
``.item()``, ``if tensor:``, ``print(t)``, ``.tolist()``, ``.cpu()``) by the user's source line:
how many reads, in which steps, how long the host stalled, how many executions they forced.

A site that reads in two or more steps is a per-step pattern (``recurring``): the usual cost.
A single read, such as printing the final loss after the loop, is listed but is no finding.
Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lazyscope.model import Run, Site


@dataclass
class SyncSite:
    site: Site | None
    count: int = 0
    steps: list[int] = field(default_factory=list)
    seconds: float = 0.0
    executions: int = 0
    reads: dict[str, int] = field(default_factory=dict)

    @property
    def recurring(self) -> bool:
        return len(self.steps) >= 2

    def detail(self) -> str:
        reads = ", ".join(f"{r} x{n}" for r, n in self.reads.items())
        text = (f"{reads} in {len(self.steps)} step{'s' if len(self.steps) != 1 else ''}: "
                f"the host waited {self.seconds:.3f} s for the device")
        if self.executions:
            text += f", forcing {self.executions} execution(s) before the step barrier"
        return text

    def fix(self) -> str:
        if any(r.startswith("if tensor") for r in self.reads):
            return ("keep the decision on the device (torch.where, masking) or check the value "
                    "after the step barrier, every N steps")
        return ("keep the value on the device (accumulate it there) and read it every N steps "
                "or after the loop, or read it after the barrier in "
                "torch_xla's xm.add_step_closure")


def sync_sites(run: Run) -> list[SyncSite]:
    """One entry per source line that read a tensor value, the longest stall first."""
    sites: dict[tuple[str, int], SyncSite] = {}
    for event in run.events:
        if event.kind != "sync":
            continue
        key = (event.site.file, event.site.line) if event.site else ("", 0)
        entry = sites.setdefault(key, SyncSite(site=event.site))
        entry.count += 1
        if event.step not in entry.steps:
            entry.steps.append(event.step)
        entry.seconds += event.seconds
        entry.executions += int(event.data.get("executions", 0) or 0)
        read = str(event.data.get("read", "read"))
        entry.reads[read] = entry.reads.get(read, 0) + 1
    return sorted(sites.values(), key=lambda s: (-s.seconds, -s.count))
