"""A torchax training loop: a jitted step (``torchax.train.make_train_step`` + ``interop.jax_jit``)
fed by a DataLoader whose collate function pads each batch to its own longest sequence: a new
shape, so a new compilation of the step, at almost every batch.

``--buckets``: the collate function pads to the next multiple of 16 instead (a few shapes,
each compiled once and reused). ``--item``: read the loss on the host every step.
``--loader FILE``: build the DataLoader with the code in FILE instead (what ``lazyscope advise
RUN --emit`` prints, as if pasted after the collate functions: ``dataset`` and the collate
functions are in scope, the code defines ``loader``)."""

import argparse
import math
import random
import runpy

import optax
import torch
import torch.nn.functional as F
import torchax
import torchax.train
from torch.utils.data import DataLoader
from torchax import interop

parser = argparse.ArgumentParser()
parser.add_argument("--buckets", action="store_true")
parser.add_argument("--item", action="store_true")
parser.add_argument("--batches", type=int, default=12)
parser.add_argument("--loader", default=None)
args = parser.parse_args()

VOCAB, DIM, BATCH = 64, 16, 4
rng = random.Random(0)
dataset = [torch.randint(1, VOCAB, (min(40, max(2, round(rng.lognormvariate(math.log(10), 0.6)))),))
           for _ in range(BATCH * args.batches)]


def pad_to_longest(batch):
    longest = max(len(x) for x in batch)
    return {"input_ids": torch.stack([F.pad(x, (0, longest - len(x))) for x in batch])}


def pad_to_buckets(batch):
    longest = -(-max(len(x) for x in batch) // 16) * 16
    return {"input_ids": torch.stack([F.pad(x, (0, longest - len(x))) for x in batch])}


loader = (runpy.run_path(args.loader, init_globals={"dataset": dataset,
                                                     "pad_to_longest": pad_to_longest,
                                                     "pad_to_buckets": pad_to_buckets})["loader"]
          if args.loader
          else DataLoader(dataset, batch_size=BATCH,
                          collate_fn=pad_to_buckets if args.buckets else pad_to_longest))


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.out = torch.nn.Linear(DIM, VOCAB)

    def forward(self, input_ids):
        return self.out(self.emb(input_ids))


torchax.enable_globally()
model = TinyLM().to("jax")
params = {n: p for n, p in model.named_parameters()}
optimizer = optax.sgd(0.1)
opt_state = interop.call_jax(optimizer.init, params)


def model_fn(weights, buffers, batch):
    return torch.func.functional_call(model, weights, (batch["input_ids"],))


def loss_fn(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))


train_step = interop.jax_jit(torchax.train.make_train_step(model_fn, loss_fn, optimizer))

for batch in loader:
    batch = {k: v.to("jax") for k, v in batch.items()}
    loss, params, opt_state = train_step(params, {}, opt_state, batch, batch["input_ids"])
    if args.item:
        print("loss", loss.item())
