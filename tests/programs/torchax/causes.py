"""One jitted function called so that each cause of a JAX recompilation happens once, after a
first call: a new shape of ``batch["x"]``, a Python float where a float32 scalar tensor was
(weak type), a new static ``scale``, and a key added to ``batch`` (pytree structure)."""

import torch
import torchax
from torchax import interop

torchax.enable_globally()


def step(w, batch, scale, offset):
    return (batch["x"] @ w).sum() * scale + offset


jitted = interop.jax_jit(step, kwargs_for_jax_jit={"static_argnums": (2,)})
w = torch.ones(4, 3).to("jax")
offset = torch.tensor(1.0).to("jax")
jitted(w, {"x": torch.ones(8, 4).to("jax")}, 2.0, offset)
jitted(w, {"x": torch.ones(8, 4).to("jax")}, 2.0, offset)
jitted(w, {"x": torch.ones(16, 4).to("jax")}, 2.0, offset)  # shape
jitted(w, {"x": torch.ones(16, 4).to("jax")}, 2.0, 1.0)  # weak type
jitted(w, {"x": torch.ones(16, 4).to("jax")}, 3.0, 1.0)  # static value
jitted(w, {"x": torch.ones(16, 4).to("jax"), "y": offset}, 3.0, 1.0)  # structure
