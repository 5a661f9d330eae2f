"""A text classifier fine-tuned the way the Hugging Face course does it: a tiny BERT (from a
BertConfig: 2 layers, 32 wide) for sequence classification, a tokenizer built in code (a word
vocabulary: nothing is downloaded), examples of varying length tokenized without padding, and
a Trainer whose ``DataCollatorWithPadding`` pads each batch to its longest example: transformers'
default dynamic padding, a new shape, so a new XLA graph, for almost every batch.

    python tests/programs/hf_classifier.py [--steps N] [--pad-to-multiple-of N]

``--pad-to-multiple-of 16`` is the fix Hugging Face documents for TPUs: a few shapes, each
compiled once.
"""

import argparse
import random
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--pad-to-multiple-of", type=int, default=None)
parser.add_argument("--attn", default=None, help="attn_implementation (default: transformers')")
parser.add_argument("--broken-collator", action="store_true",
                    help="a collator that raises (a bug in the user's data code)")
parser.add_argument("--data-collator", default=None, metavar="CODE",
                    help="a data_collator expression pasted as it is (lazyscope advise --emit's "
                    "Bucketed(data_collator, [...])); lazyscope.data's names are imported, "
                    "data_collator is the program's own collator")
args = parser.parse_args()

words = [f"w{i}" for i in range(90)]
vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
backend.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]",
                                    unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")

rng = random.Random(0)
texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 120))) for _ in range(512)]
labels = [len(t.split()) % 2 for t in texts]


class Reviews(torch.utils.data.Dataset):
    def __len__(self):
        return len(texts)

    def __getitem__(self, i):
        item = tokenizer(texts[i], truncation=True, max_length=128)
        item["labels"] = labels[i]
        return item


torch.manual_seed(0)
config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                    num_labels=2)
if args.attn:
    config._attn_implementation = args.attn
model = BertForSequenceClassification(config)
training = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=args.steps,
                             per_device_train_batch_size=8, optim="adamw_torch",
                             report_to=[], save_strategy="no", disable_tqdm=True,
                             logging_steps=1000, seed=0)
collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=args.pad_to_multiple_of)
if args.broken_collator:
    def collator(features):  # noqa: F811 - a bug: labels of another name
        raise KeyError("label_ids")
if args.data_collator:
    import lazyscope.data

    collator = eval(args.data_collator, {**vars(lazyscope.data), "tokenizer": tokenizer,
                                         "data_collator": collator})
trainer = Trainer(
    model=model,
    args=training,
    train_dataset=Reviews(),
    data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=args.pad_to_multiple_of)
    if not (args.broken_collator or args.data_collator) else collator,
)
trainer.train()
print(f"TRAINED {trainer.state.global_step} steps")
