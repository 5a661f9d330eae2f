"""A global float read by a ``torch.compile``d function and changed by the loop (a temperature
schedule): dynamo guards on the global's value, so every new value compiles again. The line to
change is where the loop sets the global, with a fix for a constant (pass it as a tensor, or
keep it fixed). Traced with ``--backend compile``."""

import torch

import lazyscope

TEMPERATURE = 1.0


@torch.compile(backend="aot_eager")
def scaled_logits(lin: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return lin(x) / TEMPERATURE


torch.manual_seed(0)
lin = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(6):
    TEMPERATURE = 1.0 + 0.5 * step  # lazyscope-expect: recompile
    loss = scaled_logits(lin, torch.randn(4, 8)).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    lazyscope.barrier()
print("done")
