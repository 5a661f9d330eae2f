"""Healthy: torch_xla's eager mode with the training step compiled by ``torch_xla.compile``,
the shape of pytorch/xla's examples/eager/train_decoder_only_eager.py: ops outside the step run
one by one (each compiled once, reused), the step is one graph."""

import torch
import torch_xla

torch_xla.experimental.eager_mode(True)
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                            torch.nn.Linear(64, 32)).to(dev)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


def step(x):
    optimizer.zero_grad()
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


compiled = torch_xla.compile(step)
for _ in range(6):
    loss = compiled(torch.randn(8, 32).to(dev))
print(f"final loss {loss.item():.4f}")
