"""Healthy programs: tiny, realistic training loops written the way a careful PyTorch/XLA user
writes them. lazyscope must report no finding for any of them (notes are allowed) and
``lazyscope check`` must pass (exit 0).

Each reads one value after its loop (allowed: a single read is not a finding). Every program was
checked against real torch_xla (2.9, CPU): no compilation after its warm-up graphs and no host
read inside the loop except in step closures.
"""

from __future__ import annotations

from pathlib import Path

HEALTHY_DIR = Path(__file__).resolve().parent

#: program names (``HEALTHY_DIR / f"{name}.py"``)
HEALTHY: list[str] = [
    "sgd_momentum",
    "adam",
    "train_eval",
    "parallel_loader",
    "grad_accumulation",
    "step_closure_logging",
    "lr_scheduler",
    "step_context",
    "mark_step_loop",
    "bucketed_lengths",
    "eval_every_n",
    "read_after_barrier_every_n",
    "scan_layers_loop",
    "async_logging",
    "checkpoint_eval",
    "adamw_warmup",
    # the shapes of real programs nobody here wrote (issue 20): accelerate's nlp_example, and
    # pytorch/xla's ZeRO-1 MNIST, eager decoder, FSDPv2 decoder and FSDP checkpoint MNIST
    "accelerate_loop",
    "zero1_optimizer",
    "eager_mode_loop",
    "fsdp_v2_spmd",
    "fsdp_checkpoint_eval",
]


def script(name: str) -> Path:
    """The path of healthy program ``name``."""
    return HEALTHY_DIR / f"{name}.py"
