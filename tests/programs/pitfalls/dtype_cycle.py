"""Not a pitfall, on purpose: the dtype of a cast cycles over three values.

A "precision sweep" that casts the activations to bfloat16, float16 or float64 depending on the
step gives a graph per dtype (the dtypes are part of the program), but the set is bounded: each
graph is compiled once and then reused, which costs three compilations in all, like three
padding buckets. lazyscope must say so in a ``reuse`` note at the cast, and report no finding
(a cost that keeps growing is what a finding is for: see ``varying_seq_len.py``).
"""

import torch
import torch_xla

DTYPES = [torch.bfloat16, torch.float16, torch.float64]

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 32).to(dev)
    h = model(x).to(DTYPES[step % 3])  # lazyscope-expect: reuse
    loss = h.pow(2).mean().float()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
