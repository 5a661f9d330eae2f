"""The CUDA device's memory per step, from torch's caching allocator (compile and eager
backends): at each step barrier the bytes in use (``memory_allocated``), the step's own peak
(``max_memory_allocated``, whose peak is then reset for the next step) and the bytes reserved
(``memory_reserved``); the device's total memory once.

Only when the program runs on CUDA and has already initialised it: lazyscope never creates a
CUDA context, and reads only the allocator's host-side counters (no synchronisation, no device
work). Elsewhere the run says "not measured", never 0.
"""

from __future__ import annotations

from typing import Any

SOURCE = "torch.cuda caching allocator"
#: why a CPU run has no device memory
NOT_ON_CPU = "the CPU device has no allocator statistics in torch (torch.cuda's are CUDA only)"


class CudaMemory:
    """Per-step allocator statistics of the current CUDA device; ``cuda`` is ``torch.cuda`` (a
    stand-in in tests)."""

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        self.used: list[int] = []
        self.step_peaks: list[int] = []
        self.reserved: list[int] = []
        self.limit: int | None = None

    def ready(self) -> bool:
        """The program runs on CUDA and has initialised it (never initialised here)."""
        try:
            return bool(self.cuda.is_available() and self.cuda.is_initialized())
        except Exception:  # noqa: BLE001 - a broken CUDA install: not measured
            return False

    def sample(self) -> None:
        """One step's figures, then the peak reset for the next step; nothing before the program
        initialised CUDA."""
        if not self.ready():
            return
        cuda = self.cuda
        self.used.append(int(cuda.memory_allocated()))
        self.step_peaks.append(int(cuda.max_memory_allocated()))
        self.reserved.append(int(cuda.memory_reserved()))
        cuda.reset_peak_memory_stats()
        if self.limit is None:
            try:
                self.limit = int(cuda.get_device_properties(cuda.current_device()).total_memory)
            except Exception:  # noqa: BLE001 - the limit is descriptive
                self.limit = None

    def info(self) -> dict[str, Any] | None:
        """The run's ``device_memory`` info, or None when no step was sampled."""
        if not self.used:
            return None
        out: dict[str, Any] = {"source": SOURCE, "used": self.used,
                               "step_peaks": self.step_peaks, "reserved": self.reserved}
        if self.limit is not None:
            out["limit"] = self.limit
        return out
