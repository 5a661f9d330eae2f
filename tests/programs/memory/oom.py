"""A training loop whose third step fails as torch_xla fails on a TPU that runs out of HBM: the
same RuntimeError text (pytorch/xla issue 8020), raised here because XLA:CPU cannot run out."""

import torch
import torch_xla

device = torch_xla.device()
w = torch.randn(256, 256, device=device, requires_grad=True)
MESSAGE = ("Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting "
           "to allocate 196.00M. That was not possible. There are 134.44M free.; (1x0x0_HBM0): "
           "while running replica 0 and partition 0 of a replicated computation (other "
           "replicas may have failed as well).")


def sync(step: int) -> None:
    torch_xla.sync()
    if step == 2:
        raise RuntimeError(MESSAGE)


for step in range(5):
    x = torch.randn(16, 256, device=device)
    loss = (x @ w).square().mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
    w.grad = None
    sync(step)
