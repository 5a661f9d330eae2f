"""A tiny GPT-2 (from GPT2Config: 1 layer, 32 wide, vocabulary 128) trained by a real
transformers Trainer on random tokens for 6 optimizer steps, on whatever device the Trainer
picks (XLA:CPU here). With LAZYSCOPE_CALLBACK_OUT set, the same training carries
lazyscope.integrations.transformers.LazyscopeCallback(out=...) and then trains once more in the
same process, with gradient accumulation and logging, into LAZYSCOPE_CALLBACK_OUT2 (a second
trace in one process; two micro-batches and a logging sync per optimizer step). Prints one JSON
line per training: ``TRAINED {"global_step": N, "run": DIR}``."""

import json
import os
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

SEQ = 16


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 64):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 128, (n, SEQ), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def train(callbacks: list, **overrides) -> Trainer:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=64)
    model = GPT2LMHeadModel(config)
    # transformers 5's default optimizer (fused AdamW) fails on XLA by itself: adamw_torch
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), optim="adamw_torch", max_steps=6,
                             report_to=[], save_strategy="no", per_device_train_batch_size=2,
                             disable_tqdm=True, **overrides)
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(), callbacks=callbacks)
    trainer.train()
    return trainer


out = os.environ.get("LAZYSCOPE_CALLBACK_OUT")
callbacks = []
if out:
    from lazyscope.integrations.transformers import LazyscopeCallback

    callbacks = [LazyscopeCallback(out=out)]
trainer = train(callbacks)
print("TRAINED " + json.dumps({"global_step": trainer.state.global_step, "run": out}))

out2 = os.environ.get("LAZYSCOPE_CALLBACK_OUT2")
if out2:
    trainer = train([LazyscopeCallback(out=out2)], gradient_accumulation_steps=2,
                    logging_steps=2)
    print("TRAINED " + json.dumps({"global_step": trainer.state.global_step, "run": out2}))
