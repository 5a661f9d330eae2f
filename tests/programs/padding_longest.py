"""A plain training loop over variable-length token sequences, each batch padded to its own
longest (``pad_sequence`` in the DataLoader's collate): a new graph shape at almost every step.
No lazyscope annotation: ``lazyscope advise RUN`` reads the lengths from the run's graphs.

``--loader FILE``: build the DataLoader with the code in FILE instead (the lines ``lazyscope
advise RUN --emit`` prints, pasted after ``pad_to_longest``: ``dataset`` and the collate are in
scope, the code defines ``loader``)."""

import argparse
import math
import random

import torch
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--loader", default=None)
parser.add_argument("--batches", type=int, default=16)
args = parser.parse_args()

VOCAB, DIM, BATCH = 64, 32, 4
rng = random.Random(0)
dataset = [{"input_ids": torch.randint(1, VOCAB, (min(48, max(2, round(
    rng.lognormvariate(math.log(12), 0.6)))),))} for _ in range(BATCH * args.batches)]


def pad_to_longest(batch):
    return {"input_ids": pad_sequence([b["input_ids"] for b in batch], batch_first=True)}


if args.loader:
    scope = {"dataset": dataset, "pad_to_longest": pad_to_longest}
    with open(args.loader) as fh:
        exec(fh.read(), scope)
    loader = scope["loader"]
else:
    loader = DataLoader(dataset, batch_size=BATCH, collate_fn=pad_to_longest)

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, VOCAB)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    ids = batch["input_ids"].to(dev)
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB),
                                             ids[:, 1:].reshape(-1), ignore_index=0)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
