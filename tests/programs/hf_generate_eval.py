"""Evaluation with ``generate()`` on XLA, as people write it after training a causal LM: a tiny
Llama (from a LlamaConfig: 1 layer, 32 wide), prompts of a few lengths tokenized with the
tokenizer's padding (left-padded, as decoder-only generation needs), and a loop that calls

    out = model.generate(**batch, max_new_tokens=N, do_sample=False)

With transformers' default cache (a ``DynamicCache`` that grows by one position per token), each
generated token is a new shape: new XLA graphs for every token. ``--static-cache`` is what
transformers documents for XLA: ``cache_implementation="static"`` (a ``StaticCache`` sized once,
``max_cache_len``), prompts padded to one length (``pad_to_multiple_of``) and a fixed
``max_new_tokens``.

    python tests/programs/hf_generate_eval.py [--batches N] [--new-tokens N] [--static-cache]
        [--train-steps N] [--one-step]

``--train-steps N``: a few training steps first (the evaluation then runs past the steps
lazyscope watches op by op); ``--one-step``: the evaluation's calls in one step (no barrier
between them).

Prints torch_xla's own counts at its end (``COUNTS {...}``).
"""

import argparse

import counts
import hf_tiny
import torch
import torch_xla
from transformers import LlamaConfig, LlamaForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--batches", type=int, default=2)
parser.add_argument("--new-tokens", type=int, default=8)
parser.add_argument("--static-cache", action="store_true")
parser.add_argument("--train-steps", type=int, default=0,
                    help="training steps (one barrier each) before the evaluation")
parser.add_argument("--one-step", action="store_true",
                    help="no barrier between the generate() calls: one after the loop")
parser.add_argument("--steps", type=int, default=None, help="(ignored: the run is its batches)")
args = parser.parse_args()

tokenizer = hf_tiny.tokenizer(padding_side="left", bert=False)
prompts = hf_tiny.texts(4 * args.batches, 5, 12, seed=3)

torch.manual_seed(0)
config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                     num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                     max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
                     eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
device = torch_xla.device()
model = LlamaForCausalLM(config).to(device)
if args.train_steps:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = tokenizer(prompts[:4], return_tensors="pt", padding="max_length",
                    max_length=16)["input_ids"].to(device)
    for _ in range(args.train_steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
model.eval()

generated = 0
for i in range(args.batches):
    texts = prompts[4 * i:4 * i + 4]
    if args.static_cache:
        batch = tokenizer(texts, return_tensors="pt", padding="max_length", max_length=16)
    else:
        batch = tokenizer(texts, return_tensors="pt", padding=True)
    batch = batch.to(device)
    with torch.no_grad():
        if args.static_cache:
            out = model.generate(**batch, max_new_tokens=args.new_tokens, do_sample=False,
                                 cache_implementation="static")
        else:
            out = model.generate(**batch, max_new_tokens=args.new_tokens, do_sample=False)
    if not args.one_step:
        torch_xla.sync()
    generated += out.shape[1] - batch["input_ids"].shape[1]
torch_xla.sync()
print(f"GENERATED {generated} tokens")
counts.report(args.batches)
