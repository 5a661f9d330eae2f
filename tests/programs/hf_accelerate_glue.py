"""Text classification with accelerate, as transformers' ``run_glue_no_trainer.py`` writes it: a
tiny BERT (from a BertConfig, 2 layers, 32 wide), a ``DataCollatorWithPadding`` built into a
variable and given to two DataLoaders, a training one (batches of 8) and an evaluation one
(batches of 16, run every few steps), ``accelerator.prepare`` around the model, optimizer, both
loaders (on XLA each batch is a step: accelerate's ``MpDeviceLoader``) and scheduler, and the
batch moved with ``batch.to(device)`` (a ``BatchEncoding``'s own method).

    data_collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=...)
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator, ...)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, ...)

Each batch is padded to its longest text: a new XLA graph for almost every batch, in training
and in evaluation.

    python tests/programs/hf_accelerate_glue.py [--steps N] [--eval-every N]
        [--pad-to-multiple-of N] [--collate CODE]

``--collate CODE``: the collate_fn expression both loaders take (pasted advice; lazyscope.data's
names, ``tokenizer`` and the program's ``data_collator`` in scope). Prints torch_xla's own counts
at its end (``COUNTS {...}``).
"""

import argparse

import counts
import hf_tiny
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    get_scheduler,
)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--eval-every", type=int, default=6)
parser.add_argument("--pad-to-multiple-of", type=int, default=None)
parser.add_argument("--collate", default=None, metavar="CODE")
args = parser.parse_args()

accelerator = Accelerator()
tokenizer = hf_tiny.tokenizer()
raw = hf_tiny.texts(400, 4, 100, seed=2)
labels = [len(t.split()) % 2 for t in raw]


def preprocess_function(text, label):
    result = tokenizer(text, truncation=True, max_length=128)
    result["labels"] = label
    return result


processed = [preprocess_function(t, y) for t, y in zip(raw, labels, strict=True)]
train_dataset, eval_dataset = processed[:336], processed[336:]

data_collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=args.pad_to_multiple_of)
data_collator = hf_tiny.pasted(args.collate, data_collator, tokenizer=tokenizer)

train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator,
                              batch_size=8)
eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=16)

torch.manual_seed(0)
config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                    num_labels=2)
model = BertForSequenceClassification(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
lr_scheduler = get_scheduler(name="linear", optimizer=optimizer, num_warmup_steps=0,
                             num_training_steps=args.steps)
model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)
device = accelerator.device

completed_steps = 0
evaluated = 0
while completed_steps < args.steps:
    model.train()
    for batch in train_dataloader:
        batch = batch.to(device)
        outputs = model(**batch)
        loss = outputs.loss
        accelerator.backward(loss)
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        completed_steps += 1
        if completed_steps % args.eval_every == 0:
            model.eval()
            correct = torch.zeros((), device=device)
            for eval_batch in eval_dataloader:
                eval_batch = eval_batch.to(device)
                with torch.no_grad():
                    outputs = model(**eval_batch)
                predictions = outputs.logits.argmax(dim=-1)
                correct += (predictions == eval_batch["labels"]).sum()
            evaluated += 1
            accelerator.print(f"step {completed_steps}: eval accuracy "
                              f"{correct.item() / len(eval_dataset):.3f}")
            model.train()
        if completed_steps >= args.steps:
            break
print(f"TRAINED {completed_steps} steps, {evaluated} evaluations")
counts.report(completed_steps)
