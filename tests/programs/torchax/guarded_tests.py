"""Two tests under ``@pytest.mark.lazyscope`` on torchax (the plugin's backend ``auto`` is
torchax: the test file imports it): a jitted step that starts recompiling at step 4 of 8, and
one that does not. Run by tests/integration/test_torchax.py with ``-p lazyscope.integrations.pytest_plugin``:
``1 failed, 1 passed``. (Named so that the suite does not collect it.)"""

import pytest
import torch
import torchax
from torchax import interop


def loop(grow_from: int) -> None:
    torchax.enable_globally()
    weight = torch.ones(8, 8).to("jax")
    step = interop.jax_jit(lambda w, x: (x @ w).sum())
    for i in range(8):
        rows = 4 + max(0, i - grow_from + 1)
        batch = torch.ones(rows, 8).to("jax")  # the line to change
        step(weight, batch)


@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2)
@pytest.mark.parametrize("grow_from", [4, 100], ids=["recompiles", "healthy"])
def test_loop(grow_from: int) -> None:
    loop(grow_from)
