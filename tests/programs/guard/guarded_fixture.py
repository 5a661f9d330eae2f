"""The ``lazyscope_guard`` fixture, with the marker's arguments: the test fails at the step
barrier of step 3 (syncs are allowed in warm-up only). Run by
tests/integration/test_pytest_plugin.py."""

import pytest
import torch
import torch_xla


@pytest.mark.lazyscope(max_recompiles=None, max_syncs_per_step=0, warmup_steps=2)
def test_reads_a_value(lazyscope_guard) -> None:
    assert lazyscope_guard.check is not None
    device = torch_xla.device()
    weight = torch.ones(4, 4).to(device)
    for step in range(6):
        loss = (weight * step).sum()
        if step >= 3:
            print(loss.item())  # the line to change
        torch_xla.sync()
