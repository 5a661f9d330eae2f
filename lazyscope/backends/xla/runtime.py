"""What a scenario runs on under the XLA backend: PyTorch/XLA on the TPU of a TPU VM, else on the
CPU (``PJRT_DEVICE``)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazyscope.backends.base import Runtime

#: Google's PCI vendor id and the device ids of TPU chips: torch_xla's own test for TPU chips
#: (``torch_xla._internal.tpu.num_available_chips``, used by its default-device choice), read
#: here without importing torch_xla (lazyscope sets the environment before torch_xla loads).
#: Not ``/dev/accel*``: NVIDIA's drivers create those too.
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = frozenset({"0x0027", "0x005e", "0x0063", "0x006f", "0x0056", "0x0062",
                             "0x0076"})


def tpu_chips(pci_root: str = "/sys/bus/pci/devices") -> int:
    """The TPU chips attached to this machine through PCI."""
    found = 0
    for vendor in glob.glob(os.path.join(pci_root, "*", "vendor")):
        try:
            if Path(vendor).read_text().strip() != GOOGLE_PCI_VENDOR:
                continue
            device = (Path(vendor).parent / "device").read_text().strip()
        except OSError:
            continue
        found += device in TPU_PCI_DEVICES
    return found


def default_pjrt_device() -> str:
    """The ``PJRT_DEVICE`` lazyscope uses when none is set: TPU when this machine has TPU chips
    (a TPU VM, a Colab TPU runtime), else CPU."""
    return "TPU" if tpu_chips() else "CPU"



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
