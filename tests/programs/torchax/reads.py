"""Every kind of host read of a torchax tensor, once per step of a jitted step, and of a JAX
array: each is a sync event at its own line."""

import jax
import numpy as np
import torch
import torchax
from torchax import interop

torchax.enable_globally()
step = interop.jax_jit(lambda w, x: (torch.tanh(x @ w), (x @ w).sum()))
w = torch.randn(8, 8).to("jax")
x = torch.randn(4, 8).to("jax")
for _ in range(3):
    x, total = step(w, x)
    a = total.item()  # read: item
    b = float(total)  # read: float
    c = x.cpu()  # read: cpu
    d = x.numpy()  # read: numpy
    e = x.tolist()  # read: tolist
    print(total)  # read: print
    f = jax.device_get(total.jax())  # read: device_get
    g = np.asarray(x.jax())  # read: asarray
