"""Pitfall: variable-length batches through ``torch.compile(backend="openxla")``.

dynamo traces the step once per input shape and torch_xla compiles each trace: a batch padded
to its own longest sequence (``pad_sequence``) compiles a new XLA program at almost every step.
The line to change is where the batch is made and moved to the device, as without
torch.compile. Fix: pad to a few fixed bucket lengths (``lazyscope advise``).
"""

import torch
import torch_xla
from torch.nn.utils.rnn import pad_sequence

LENGTHS = [[5, 9], [12, 3], [7, 7], [15, 2], [4, 11], [13, 6]]
dev = torch_xla.device()
torch.manual_seed(0)
emb = torch.nn.Embedding(64, 32).to(dev)
head = torch.nn.Linear(32, 64).to(dev)


@torch.compile(backend="openxla")
def score(tokens):
    return head(emb(tokens)).logsumexp(-1).mean()


total = torch.zeros((), device=dev)
for lengths in LENGTHS:
    docs = [torch.randint(1, 64, (n,)) for n in lengths]
    tokens = pad_sequence(docs, batch_first=True).to(dev)  # lazyscope-expect: recompile
    with torch.no_grad():
        total += score(tokens)
    torch_xla.sync()
print(f"total {total.item():.3f}")
