"""A text classifier written the way people write one: a dataset of ``(tokens, label)`` items
of varying length, a DataLoader that shuffles (unseeded: every run sees another order) and a
``collate_fn`` that pads each batch to its longest example with ``pad_sequence``.

On XLA each new padded length is a new graph: the collate function makes the shape, so that is
the line to change (pad to a few lengths there).

    python tests/programs/text_classifier.py [--steps N] [--collate CODE | --loader FILE]

``--loader FILE``: Python lines run in place of the loader built here, as they are (what
``lazyscope advise RUN --emit`` prints, pasted into a file): ``dataset`` is in scope and the
lines define ``loader``.
"""

import argparse
import random

import torch
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--collate", default=None, metavar="CODE",
                    help="a collate_fn expression pasted as it is (lazyscope advise --emit's "
                    "PadToBuckets(...)); lazyscope.data's names are imported")
parser.add_argument("--loader", default=None, metavar="FILE",
                    help="lines that build `loader` from `dataset` (advise --emit's output)")
args = parser.parse_args()

rng = random.Random(0)
dataset = [(torch.randint(1, 100, (rng.randint(4, 120),)), rng.randint(0, 1)) for _ in range(400)]


def collate(batch):
    tokens = pad_sequence([t for t, _ in batch], batch_first=True)
    return tokens, torch.tensor([y for _, y in batch])


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 32, padding_idx=0)
        self.head = torch.nn.Linear(32, 2)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(1))


dev = torch_xla.device()
model = Classifier().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
if args.collate:
    import lazyscope.data

    collate = eval(args.collate, vars(lazyscope.data))  # noqa: F811 - the pasted advice
loader = DataLoader(dataset, batch_size=8, shuffle=True, collate_fn=collate)
if args.loader:
    with open(args.loader) as f:
        exec(f.read())
for step, (x, y) in enumerate(loader):
    if step == args.steps:
        break
    x, y = x.to(dev), y.to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"trained {min(step, args.steps)} steps")
