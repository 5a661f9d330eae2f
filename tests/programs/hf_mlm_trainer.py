"""Masked-language-model pre-training as transformers' ``run_mlm.py`` writes it: a tiny BERT
(from a BertConfig, 2 layers, 32 wide), texts tokenized without padding (with their special
tokens mask), the collator built into a variable and handed to the Trainer:

    data_collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=...)
    trainer = Trainer(..., data_collator=data_collator)

The collator pads each batch to its longest text (a new XLA graph for almost every batch) and
masks 15% of the real tokens: its job is more than padding. ``--clm``: the same collator with
``mlm=False`` (labels are the ids, -100 on padding) on a tiny GPT-2.

    python tests/programs/hf_mlm_trainer.py [--steps N] [--clm] [--pad-to-multiple-of N]
        [--group-by-length] [--data-collator CODE]

Prints torch_xla's own counts at its end (``COUNTS {...}``).
"""

import argparse
import tempfile

import counts
import hf_tiny
from transformers import (
    BertConfig,
    BertForMaskedLM,
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainingArguments,
)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--clm", action="store_true", help="mlm=False on a causal LM")
parser.add_argument("--pad-to-multiple-of", type=int, default=None)
parser.add_argument("--group-by-length", action="store_true")
parser.add_argument("--data-collator", default=None, metavar="CODE",
                    help="the data_collator expression to train with (pasted advice)")
args = parser.parse_args()

tokenizer = hf_tiny.tokenizer(bert=not args.clm)
raw = hf_tiny.texts(512, 4, 110, seed=1)


def tokenize_function(text):
    return tokenizer(text, truncation=True, max_length=128, return_special_tokens_mask=True)


train_dataset = [tokenize_function(t) for t in raw]

if args.clm:
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2,
                        n_positions=128, pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
else:
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=128)
    model = BertForMaskedLM(config)

training_args = TrainingArguments(
    output_dir=tempfile.mkdtemp(), max_steps=args.steps, per_device_train_batch_size=8,
    optim="adamw_torch", report_to=[], save_strategy="no", disable_tqdm=True,
    logging_steps=1000, seed=0,
    train_sampling_strategy="group_by_length" if args.group_by_length else "random")

# Data collator
# This one will take care of randomly masking the tokens.
data_collator = DataCollatorForLanguageModeling(
    tokenizer=tokenizer,
    mlm=not args.clm,
    mlm_probability=0.15,
    pad_to_multiple_of=args.pad_to_multiple_of,
)
data_collator = hf_tiny.pasted(args.data_collator, data_collator, tokenizer=tokenizer,
                               model=model)

trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=train_dataset,
    data_collator=data_collator,
)
trainer.train()
print(f"TRAINED {trainer.state.global_step} steps")
counts.report(trainer.state.global_step)
