"""Two guarded tests whose verdicts must not depend on what ran before them in the process:
``test_a`` runs a loop on length 24; ``test_b`` runs length 16, then switches to 24 mid-test
(a recompilation after its warm-up: it fails). Run ``pytest``, ``-k test_b``, ``-x`` and ``-n 2``
on this file (tests/integration/test_guard_order.py): the outcome is the same, B failing at the
line that makes the batch, whether torch_xla compiled B's length-24 graph now or found it in the
process's cache (A compiled it). (Named so that the suite does not collect it.)"""

import pytest
import torch
import torch_xla


def loop(lengths: list[int]) -> None:
    device = torch_xla.device()
    weight = torch.ones(8, 8).to(device)
    for n in lengths:
        batch = torch.ones(n, 8).to(device)  # the line to change
        loss = (batch @ weight).sum()  # noqa: F841 - alive at the barrier: it is computed
        torch_xla.sync()


@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2)
def test_a() -> None:
    loop([24] * 8)


@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2)
def test_b() -> None:
    loop([16] * 4 + [24] * 4)
