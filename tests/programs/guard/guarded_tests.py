"""Two tests under ``@pytest.mark.lazyscope``: one starts recompiling at step 4 of 8, one does
not. Run by tests/integration/test_pytest_plugin.py with ``-p lazyscope.integrations.pytest_plugin``: it
gives ```1 failed, 1 passed``. (Named so that the suite does not collect it: tests/programs is data.)"""

import pytest
import torch
import torch_xla


def loop(grow_from: int) -> None:
    device = torch_xla.device()
    weight = torch.ones(8, 8).to(device)
    for step in range(8):
        rows = 4 + max(0, step - grow_from + 1)
        batch = torch.ones(rows, 8).to(device)  # the line to change
        loss = (batch @ weight).sum()  # noqa: F841 - alive at the barrier: it is computed
        torch_xla.sync()


@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2)
def test_recompiles() -> None:
    loop(grow_from=4)


@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2)
def test_healthy() -> None:
    loop(grow_from=100)
