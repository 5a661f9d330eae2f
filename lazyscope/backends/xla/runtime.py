"""What a scenario runs on under the XLA backend: PyTorch/XLA on the TPU of a TPU VM, else on the
CPU (``PJRT_DEVICE``)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator
from typing import Any

from lazyscope.backends.base import Runtime


def default_pjrt_device() -> str:
    """TPU when this machine has TPU chips, else CPU."""
    if glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"):
        return "TPU"
    return "CPU"




class XlaRuntime(Runtime):
    """PyTorch/XLA: TPU on a TPU VM, the CPU elsewhere (``PJRT_DEVICE``)."""

    name = "xla"

    def device(self) -> Any:
        os.environ.setdefault("PJRT_DEVICE", default_pjrt_device())
        import torch_xla

        return torch_xla.device()

    def barrier(self) -> None:
        import torch_xla

        torch_xla.sync()

    @contextlib.contextmanager
    def step(self, index: int, name: str = "train_step") -> Iterator[None]:
        import torch_xla.debug.profiler as xp

        # StepTrace ends with torch_xla.sync(): the step barrier.
        with xp.StepTrace(name, step_num=index):
            yield

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        import torch_xla.debug.profiler as xp

        with xp.Trace(name):
            yield
