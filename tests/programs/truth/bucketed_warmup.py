"""A correctly bucketed loop (lazyscope.data.PadToBuckets in a DataLoader): its four buckets are
met in the first four steps, shortest first, each graph holding more than the last, and then
reused for 20 steps. Warm-up, not tensors kept across steps: no growing_memory finding, no
recompile finding."""

import random

import torch
import torch_xla

from lazyscope.data import PadToBuckets

BUCKETS = [16, 32, 48, 64]
random.seed(0)
lengths = [12, 30, 45, 60] + [random.randint(4, 64) for _ in range(20)]
rows = [{"input_ids": list(range(1, n + 1))} for n in lengths]
loader = torch.utils.data.DataLoader(rows, batch_size=1, collate_fn=PadToBuckets(BUCKETS))
dev = torch_xla.device()
torch.manual_seed(0)
embed = torch.nn.Embedding(128, 64).to(dev)
head = torch.nn.Linear(64, 128).to(dev)
opt = torch.optim.SGD([*embed.parameters(), *head.parameters()], lr=0.01)
for batch in loader:
    ids = batch["input_ids"].to(dev)
    logits = head(embed(ids))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten(),
                                             ignore_index=0)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
