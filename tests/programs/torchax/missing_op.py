"""An op torchax has no lowering for (``torch.geqrf``, aten::geqrf): torchax raises
OperatorNotFound at the line that calls it, after two good steps."""

import torch
import torchax
from torchax import interop

torchax.enable_globally()
w = torch.randn(8, 8).to("jax")
step = interop.jax_jit(lambda w, x: torch.tanh(x @ w))
x = torch.randn(4, 8).to("jax")
for _ in range(2):
    x = step(w, x)
a, tau = torch.geqrf(w)  # lazyscope-expect: missing op
