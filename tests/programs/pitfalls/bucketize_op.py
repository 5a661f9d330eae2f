"""Pitfall: ``torch.bucketize`` has no XLA lowering: it runs on the CPU
(``aten::bucketize.Tensor``).

Discretising a value into bins every step sends it to the host and back. Fix: compare against
the bin edges on the device: ``(x[..., None] > edges).sum(-1)`` is lowered and gives the same
bucket indices (for ``right=False``).
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
edges = torch.linspace(-2, 2, 7).to(dev)
model = torch.nn.Linear(32, 32).to(dev)
emb = torch.nn.Embedding(8, 32).to(dev)
params = list(model.parameters()) + list(emb.parameters())
opt = torch.optim.SGD(params, lr=0.01)
for _step in range(6):
    x = torch.randn(8, 32).to(dev)
    bins = torch.bucketize(x.mean(1), edges)  # lazyscope-expect: fallback
    loss = (model(x) + emb(bins)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
