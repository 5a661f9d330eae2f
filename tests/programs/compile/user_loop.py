"""A plain user training loop with its own torch.compile and lazyscope.barrier() at step end.

No scenario kit: this is how a user's script marks steps for ``--backend eager|compile``
(``lazyscope.barrier()`` waits for CUDA and ends the step; untraced it only waits). The length
varies every step and ``dynamic=False`` is set, so every new length recompiles.

    lazyscope trace --backend compile --steps 4 tests/programs/compile/user_loop.py
"""

import torch

import lazyscope

model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()),
                      dynamic=False)
for length in [5, 7, 9, 11, 13, 15]:
    with torch.no_grad():
        out = model(torch.randn(2, length, 16))  # the shape of dimension 1 changes every step
    lazyscope.barrier()
