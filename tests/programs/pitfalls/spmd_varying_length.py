"""Pitfall: variable-length batches under SPMD (``xr.use_spmd()``, ``xs.mark_sharding``).

Each batch is padded only to its own longest sequence (``pad_sequence``), so the sharded input
has a new shape at almost every step and the SPMD program is compiled again. As on plain XLA,
the line to change is where the batch is made and moved to the device. Fix: pad to a few fixed
bucket lengths (``lazyscope advise``).
"""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.nn.utils.rnn import pad_sequence

LENGTHS = [[5, 9], [12, 3], [7, 7], [15, 2], [4, 11], [13, 6]]
xr.use_spmd()
devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(devices), (devices, 1), ("data", "model"))
dev = torch_xla.device()
torch.manual_seed(0)
emb = torch.nn.Embedding(64, 32).to(dev)
head = torch.nn.Linear(32, 64).to(dev)
opt = torch.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.05)
for lengths in LENGTHS:
    docs = [torch.randint(1, 64, (n,)) for n in lengths]
    tokens = pad_sequence(docs, batch_first=True).to(dev)  # lazyscope-expect: recompile
    xs.mark_sharding(tokens, mesh, ("data", None))
    logits = head(emb(tokens))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
