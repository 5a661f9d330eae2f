"""Sequence-to-sequence fine-tuning as transformers' ``run_summarization.py`` writes it: a tiny
T5 (from a T5Config: 1 layer, 32 wide), sources and targets tokenized without padding, the
collator built into a variable and handed to a ``Seq2SeqTrainer``:

    data_collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100,
                                           pad_to_multiple_of=...)

It pads the inputs to the longest source and, separately, the labels to the longest target
(-100 on their padding), and makes ``decoder_input_ids`` by shifting the labels right: every
batch a new pair of lengths. ``--evaluate``: after training, ``trainer.evaluate()`` with
``predict_with_generate`` (``generate()`` inside transformers' evaluation loop).

    python tests/programs/hf_seq2seq_trainer.py [--steps N] [--pad-to-multiple-of N]
        [--evaluate] [--data-collator CODE]

Prints torch_xla's own counts at its end (``COUNTS {...}``).
"""

import argparse
import tempfile

import counts
import hf_tiny
import torch
from transformers import (
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    T5Config,
    T5ForConditionalGeneration,
)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--pad-to-multiple-of", type=int, default=None)
parser.add_argument("--evaluate", action="store_true")
parser.add_argument("--data-collator", default=None, metavar="CODE",
                    help="the data_collator expression to train with (pasted advice)")
args = parser.parse_args()

tokenizer = hf_tiny.tokenizer(bert=False)
sources = hf_tiny.texts(256, 6, 60, seed=4)
targets = hf_tiny.texts(256, 2, 20, seed=5)


def preprocess_function(source, target):
    model_inputs = tokenizer(source, max_length=64, truncation=True)
    labels = tokenizer(text_target=target, max_length=24, truncation=True)
    model_inputs["labels"] = labels["input_ids"]
    return model_inputs


train_dataset = [preprocess_function(s, t) for s, t in zip(sources, targets, strict=True)]
eval_dataset = train_dataset[:8]

torch.manual_seed(0)
config = T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=16, num_layers=1,
                  num_heads=2, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=tokenizer.eos_token_id,
                  decoder_start_token_id=tokenizer.pad_token_id)
model = T5ForConditionalGeneration(config)

training_args = Seq2SeqTrainingArguments(
    output_dir=tempfile.mkdtemp(), max_steps=args.steps, per_device_train_batch_size=8,
    per_device_eval_batch_size=4, optim="adamw_torch", report_to=[], save_strategy="no",
    disable_tqdm=True, logging_steps=1000, seed=0, predict_with_generate=True,
    generation_max_length=8, generation_num_beams=1)

# Data collator
label_pad_token_id = -100
data_collator = DataCollatorForSeq2Seq(
    tokenizer,
    model=model,
    label_pad_token_id=label_pad_token_id,
    pad_to_multiple_of=args.pad_to_multiple_of,
)
data_collator = hf_tiny.pasted(args.data_collator, data_collator, tokenizer=tokenizer,
                               model=model)

trainer = Seq2SeqTrainer(
    model=model,
    args=training_args,
    train_dataset=train_dataset,
    eval_dataset=eval_dataset,
    processing_class=tokenizer,
    data_collator=data_collator,
)
trainer.train()
print(f"TRAINED {trainer.state.global_step} steps")
if args.evaluate:
    metrics = trainer.evaluate(max_length=8, num_beams=1, metric_key_prefix="eval")
    print(f"EVALUATED {metrics.get('eval_loss')}")
counts.report(trainer.state.global_step)
