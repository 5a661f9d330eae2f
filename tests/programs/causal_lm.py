"""A small causal language model trained the way people write one: a dataset of documents of
varying length (dict items, ``{"input_ids": tensor}``), a DataLoader that shuffles and whose
``collate_fn`` pads each batch to its longest document with ``pad_sequence`` (labels -100 on
the padding), and a one-block decoder that takes ``position_ids`` and an attention mask, as
Hugging Face decoders do (so rows packed with several documents can keep them apart).

On XLA each new padded length is a new graph: the collate function makes the shape.

    python tests/programs/causal_lm.py [--steps N] [--loader FILE] [--accelerate]

``--loader FILE``: Python lines run in place of the loader built here, as they are (what
``lazyscope advise RUN --emit`` prints, pasted into a file): ``dataset`` is in scope and the
lines define ``loader``. A batch with ``document_ids`` (packed rows) gets the document-causal
mask and its ``position_ids``; a padded one the causal mask over its real tokens.
``--accelerate``: the same loop as accelerate's users write it (``Accelerator().prepare`` wraps
the model, the optimizer and the loader; ``accelerator.backward``).
"""

import argparse
import random

import torch
import torch.nn.functional as F
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--loader", default=None, metavar="FILE",
                    help="lines that build `loader` from `dataset` (advise --emit's output)")
parser.add_argument("--accelerate", action="store_true",
                    help="train as an accelerate loop: Accelerator().prepare(model, opt, loader)")
args = parser.parse_args()

VOCAB, WIDTH, POSITIONS = 256, 64, 512
rng = random.Random(0)
dataset = [{"input_ids": torch.randint(1, VOCAB, (rng.randint(8, 128),))} for _ in range(2000)]


def collate(batch):
    ids = pad_sequence([item["input_ids"] for item in batch], batch_first=True)
    mask = ids != 0
    return {"input_ids": ids, "attention_mask": mask.long(),
            "labels": ids.masked_fill(~mask, -100)}


loader = DataLoader(dataset, batch_size=8, shuffle=True, collate_fn=collate, drop_last=True)
if args.loader:
    with open(args.loader) as f:
        exec(f.read())


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.pos = torch.nn.Embedding(POSITIONS, WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.out = torch.nn.Linear(WIDTH, WIDTH)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(),
                                       torch.nn.Linear(4 * WIDTH, WIDTH))
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, input_ids, position_ids, attn_mask):
        h = self.embed(input_ids) + self.pos(position_ids)
        b, n, _ = h.shape
        q, k, v = self.qkv(h).view(b, n, 3, 4, WIDTH // 4).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        h = h + self.out(a.transpose(1, 2).reshape(b, n, WIDTH))
        return self.head(h + self.mlp(h))


device = torch_xla.device()
model = Decoder().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
if args.accelerate:
    from accelerate import Accelerator

    accelerator = Accelerator()
    model, opt, loader = accelerator.prepare(model, opt, loader)
    device = accelerator.device
done = 0
while done < args.steps:
    for batch in loader:
        if done >= args.steps:
            break
        batch = {k: v.to(device) for k, v in batch.items()}
        ids = batch["input_ids"]
        n = ids.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
        if "document_ids" in batch:
            docs = batch["document_ids"]
            mask = ((docs[:, :, None] == docs[:, None, :]) & causal)[:, None]
            positions = batch["position_ids"]
        else:
            real = batch["attention_mask"].bool()
            mask = (causal & (real[:, None, :] | torch.eye(n, dtype=torch.bool,
                                                             device=device)))[:, None]
            positions = torch.arange(n, device=device).expand_as(ids)
        logits = model(ids, positions, mask)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten(),
                               ignore_index=-100)
        accelerator.backward(loss) if args.accelerate else loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        done += 1
print(f"TRAINED {done} steps")
