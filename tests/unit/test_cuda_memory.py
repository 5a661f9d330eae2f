"""CUDA device memory per step for the compile and eager backends (issue 32, item 2): the
allocator's counters read at each barrier only once the program initialised CUDA, the peak
reset each step, never a CUDA context made by lazyscope; a real GPU test where one exists."""

from __future__ import annotations

import pytest

from lazyscope.analyze.memory import device_memory
from lazyscope.backends.pytorch.cudamem import SOURCE, CudaMemory
from lazyscope.model.info import run_info


class FakeCuda:
    """torch.cuda's allocator counters, recording each call."""

    def __init__(self, initialised: bool) -> None:
        self.initialised = initialised
        self.calls: list[str] = []
        self.allocated, self.peak, self.reserved_ = 0, 0, 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialised

    def memory_allocated(self) -> int:
        self.calls.append("allocated")
        return self.allocated

    def max_memory_allocated(self) -> int:
        self.calls.append("max")
        return self.peak

    def memory_reserved(self) -> int:
        return self.reserved_

    def reset_peak_memory_stats(self) -> None:
        self.calls.append("reset")
        self.peak = self.allocated

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, index: int) -> object:
        return type("Props", (), {"total_memory": 80 << 30})()

    def synchronize(self) -> None:  # never called: the counters need no sync
        raise AssertionError("synchronize called")

    def init(self) -> None:
        raise AssertionError("lazyscope initialised CUDA")


def test_nothing_is_read_before_the_program_initialised_cuda() -> None:
    cuda = FakeCuda(initialised=False)
    mem = CudaMemory(cuda)
    mem.sample()
    assert cuda.calls == [] and mem.info() is None


def test_each_step_its_own_peak_then_the_peak_is_reset() -> None:
    cuda = FakeCuda(initialised=True)
    mem = CudaMemory(cuda)
    for allocated, peak, reserved in ((100, 500, 1024), (100, 300, 1024), (200, 900, 2048)):
        cuda.allocated, cuda.peak, cuda.reserved_ = allocated, peak, reserved
        mem.sample()
    assert cuda.calls == ["allocated", "max", "reset"] * 3
    info = mem.info()
    assert info == {"source": SOURCE, "used": [100, 100, 200], "step_peaks": [500, 300, 900],
                    "reserved": [1024, 1024, 2048], "limit": 80 << 30}
    dev, note = device_memory(run_info({"device_memory": info}))
    assert note == "" and dev is not None
    assert (dev.peak, dev.reserved_max, dev.used_max, dev.headroom) == (
        900, 2048, 200, (80 << 30) - 900)


def test_real_cuda_allocator_statistics() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine: the allocator statistics need a GPU")
    x = torch.empty(1 << 20, device="cuda")  # the program initialises CUDA: 4 MiB
    mem = CudaMemory(torch.cuda)
    y = x * 2  # a second 4 MiB buffer, alive at the barrier
    mem.sample()
    del y
    mem.sample()
    info = mem.info()
    assert info is not None
    assert info["used"][0] >= 8 << 20 and info["used"][1] <= info["used"][0] - (4 << 20)
    assert info["step_peaks"][0] >= 8 << 20 and info["limit"] > 0
