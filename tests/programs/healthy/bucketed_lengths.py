"""Healthy: variable-length batches padded up to one of three fixed bucket lengths (32, 64, 96).

Three graphs are compiled by the time each bucket has been seen, and every later step reuses
one of them: bounded, reused graphs are warm-up, whatever their shapes. lazyscope must say so
in a ``reuse`` note, not report recompilations (this is what `lazyscope advise` recommends).
"""

import random

import torch
import torch_xla

BUCKETS = (32, 64, 96)
dev = torch_xla.device()
torch.manual_seed(0)
rng = random.Random(0)
emb = torch.nn.Embedding(128, 32).to(dev)
head = torch.nn.Linear(32, 128).to(dev)
opt = torch.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.05)
for _step in range(23):
    longest = rng.choice((30, 60, 90))  # batches of short, medium and long documents
    lengths = [rng.randint(5, longest) for _ in range(4)]
    bucket = next(b for b in BUCKETS if b >= max(lengths))
    tokens = torch.zeros(4, bucket, dtype=torch.long)
    for row, n in enumerate(lengths):
        tokens[row, :n] = torch.randint(1, 128, (n,))
    tokens = tokens.to(dev)
    logits = head(emb(tokens))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten(),
                                             ignore_index=0)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
