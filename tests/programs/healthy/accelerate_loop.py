"""Healthy: a loop shaped like accelerate's examples/nlp_example.py, on XLA.

``Accelerator()`` picks the XLA device when torch_xla is installed; the loop prepares the model,
optimizer, data loaders and a linear warm-up schedule, steps with ``accelerator.backward``, and
evaluates each epoch with ``accelerator.gather_for_metrics``. Every sequence has one length (the
example pads to a fixed max_length on XLA), so no attention mask is passed: given one,
transformers 5 checks it on the host at every forward to see whether it can skip it (a real
read, which lazyscope reports inside transformers, masking_utils.py). A tiny BERT built from a
config: nothing downloaded. The accuracy is read once, at the end.
"""

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup


def batches(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 128, (n, 16), generator=g)
    return TensorDataset(ids, torch.randint(0, 2, (n,), generator=g))


accelerator = Accelerator()
torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(
    vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=64, max_position_embeddings=32, num_labels=2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train = DataLoader(batches(16, 0), batch_size=4, shuffle=True, drop_last=True)
evaluation = DataLoader(batches(8, 1), batch_size=4, drop_last=True)
schedule = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=8)
model, optimizer, train, evaluation, schedule = accelerator.prepare(
    model, optimizer, train, evaluation, schedule)
correct = []
for _epoch in range(2):
    model.train()
    for ids, labels in train:
        loss = model(input_ids=ids, labels=labels).loss
        accelerator.backward(loss)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()
    for ids, labels in evaluation:
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        predictions, references = accelerator.gather_for_metrics((logits.argmax(-1), labels))
        correct.append((predictions == references).sum())
accelerator.print("correct over both epochs", int(sum(correct).item()), "of 16")
