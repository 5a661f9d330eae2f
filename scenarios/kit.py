"""What built-in scenarios (and users' own scripts, if they like) share: common arguments and
the runtime they run on.

Every scenario takes ``--steps``, ``--backend``, ``--device``, ``--dynamic`` and ``--seed`` so
that ``lazyscope trace NAME --steps N`` and ``python -m lazyscope_scenarios.NAME --steps N``
mean the same. Traced, a scenario runs on the trace's backend, and its device and ``dynamic``
come from the trace's options (``lazyscope trace --device cuda NAME``) unless its own arguments
say otherwise. This module imports no torch: the CLI validates a scenario's arguments before
anything heavy loads.
"""

from __future__ import annotations

import argparse
import functools
import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, NamedTuple

import lazyscope
from lazyscope.core.padding import Policy, fixed_policy, length_stream, plan_batches, read_lengths

DYNAMIC_CHOICES = {"auto": None, "true": True, "false": False}


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def lengths_file(text: str) -> list[int]:
    """argparse type: a file with one positive integer length per line (blank lines skipped)."""
    try:
        return [int(v) for v in read_lengths(text)]
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def n_params(model: object) -> int:
    """The number of parameters of a torch module."""
    return sum(t.numel() for t in model.parameters())  # type: ignore[attr-defined]


def base_parser(description: str, *, default_steps: int = 20,
                prog: str | None = None) -> argparse.ArgumentParser:
    """An ArgumentParser with the arguments every scenario shares."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--steps", type=positive_int, default=default_steps, help="number of steps")
    parser.add_argument(
        "--backend", choices=lazyscope.backend_names(), default=_default_backend(),
        help="where the workload runs (default: the backend of the trace in progress, else xla)",
    )
    parser.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default=None,
        help="device for the eager/compile backends (default: the trace's --device, else auto; "
        "the XLA backend uses PJRT_DEVICE)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument(
        "--dynamic", choices=sorted(DYNAMIC_CHOICES), default=None,
        help="torch.compile's dynamic= for --backend compile (default: the trace's --dynamic, "
        "else auto: static first, dynamic after a shape recompiles)",
    )
    return parser


def _default_backend() -> str:
    """The backend of the trace in progress, else ``xla``."""
    options = lazyscope.tracing()
    return options.backend if options is not None else "xla"


def runtime_from_args(args: argparse.Namespace) -> lazyscope.Runtime:
    """The runtime a scenario's parsed arguments ask for; what they leave open comes from the
    trace in progress."""
    dynamic_arg = getattr(args, "dynamic", None)
    return lazyscope.runtime(args.backend, device=getattr(args, "device", None),
                             dynamic=DYNAMIC_CHOICES[dynamic_arg] if dynamic_arg is not None
                             else None)


class PaddingPlan(NamedTuple):
    """What a padding scenario runs: the ``policy`` (``auto`` and ``bucket:auto`` resolved by
    the advisor, whose ``advice`` is kept), the lengths of every padded batch (``batches``; None
    for packed rows) and the rest of the length ``stream`` (packed rows draw from it)."""

    policy: Policy
    advice: lazyscope.Advice | None
    batches: list[list[int]] | None
    stream: Iterator[int]
    chosen: str | None = None


def padding_plan(args: argparse.Namespace, *, max_len: int, batch: int,
                 dims: dict[str, Any], packing: bool = True) -> PaddingPlan:
    """Resolve ``--padding`` for this run's own seeded length stream (``--lengths`` or uniform):
    ``auto`` is the advisor's recommendation over the first ``--steps`` batches of the stream
    for ``--horizon`` steps (default ``--steps``: the run being measured), ``bucket:auto`` its
    best K buckets for ``--batching``; ``packing=False`` when the model cannot keep packed
    documents apart."""
    stream = length_stream(args.seed, max_len, args.lengths)
    grouped = args.batching == "grouped"
    advice = chosen = None
    if args.padding in ("auto", "bucket:auto"):
        sample = [next(stream) for _ in range(args.steps * batch)]
        stream = itertools.chain(sample, stream)
        advice = lazyscope.advise(sample, batch=batch, max_len=max_len,
                                  horizon=args.horizon or args.steps,
                                  max_buckets=args.max_buckets, grouped=grouped,
                                  packing=packing and args.padding == "auto", dims=dims)
        chosen = advice.recommended if args.padding == "auto" else advice.best_buckets
        policy = chosen.policy
    else:
        policy = fixed_policy(args.padding, max_len, batch)
    if grouped and not policy.packed:
        policy = replace(policy, grouped=True)
    batches = None if policy.packed else plan_batches(stream, args.steps, batch, policy.grouped)
    return PaddingPlan(policy, advice, batches, stream, chosen.name if chosen else None)


def policy_info(plan: PaddingPlan) -> dict[str, Any]:
    """The run-wide values a padding scenario records (``lazyscope.set_info``) for its policy:
    what ``compare`` and ``advise`` read back."""
    policy = plan.policy
    return {"buckets": list(policy.boundaries) if not policy.packed else [policy.row_len],
            "resolved_policy": policy.label(),
            "packed_rows": [policy.rows, policy.row_len] if policy.packed else None,
            "batching": "grouped" if policy.grouped else "random",
            "advice_k": (len(policy.boundaries) if plan.advice is not None and not policy.packed
                         else None),
            "advice_plan": plan.chosen}


class StepsRun(NamedTuple):
    """What :func:`run_length_steps` ran: real and computed tokens, seconds, the last loss."""

    real_tokens: int
    computed_tokens: int
    wall_s: float
    loss: float


def add_loader_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` (the batches' host work in N ``DataLoader`` workers, pinned for CUDA)."""
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="DataLoader workers that make the batches (random tokens, collate, "
                        "the attention layout's host tensors) ahead of the step; 0 (default): "
                        "in the step's own thread, as the article's benchmark does. On CUDA the "
                        "batches are pinned and copied with non_blocking=True")


def _batch_seed(seed: int, step: int) -> int:
    """Step ``step``'s token seed: the same batch whichever process makes it."""
    return (seed + 1) * 1_000_003 + step


@functools.lru_cache(maxsize=1)
def _dataset_class() -> type:
    """The padding scenarios' ``IterableDataset`` (defined on first use: this module imports no
    torch). Each step's batch: its lengths from the plan (its padded batch, or the packer's
    rows), fresh seeded random tokens, the policy's collator, ``to_batch``, then ``stage`` (the
    model's host-side inputs). With workers, worker k of N makes the batches of steps k, k + N
    ...: the ``DataLoader`` hands them out in step order; every worker follows the packer
    through every step, so their rows are the main process's."""
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    from lazyscope.core.padding import Packer

    class LengthBatches(IterableDataset):  # type: ignore[type-arg]
        def __init__(self, plan: PaddingPlan, steps: int, seed: int, vocab: int, rows: int,
                     row_len: int, collate: Any, to_batch: Any, stage: Any) -> None:
            self.plan, self.steps, self.seed, self.vocab = plan, steps, seed, vocab
            self.rows, self.row_len = rows, row_len
            self.collate, self.to_batch, self.stage = collate, to_batch, stage

        def __iter__(self) -> Iterator[Any]:
            plan = self.plan
            packed = plan.policy.packed
            packer = Packer(plan.stream, plan.policy.rows or self.rows,
                            plan.policy.row_len or self.row_len) if packed else None
            worker = get_worker_info()
            k, n = (worker.id, worker.num_workers) if worker is not None else (0, 1)
            for i in range(self.steps):
                if packer is not None:
                    # the packer's choice in its placement order: PackRows lays it out the
                    # same way
                    chosen = sorted((item for row in packer.next_rows() for item in row),
                                    key=lambda item: (-item[1], item[0]))
                    lens = [n_ for _, n_ in chosen]
                else:
                    assert plan.batches is not None
                    lens = plan.batches[i]
                if i % n != k:
                    continue
                gen = torch.Generator().manual_seed(_batch_seed(self.seed, i))
                docs = [torch.randint(1, self.vocab, (m,), generator=gen) for m in lens]
                yield self.stage(self.to_batch(self.collate(docs), lens, packed))

    return LengthBatches


def length_batches(args: argparse.Namespace, plan: PaddingPlan, *, vocab: int, rows: int,
                   row_len: int, collate: Any, to_batch: Any, stage: Any = None,
                   pin_memory: bool = False) -> Any:
    """The ``DataLoader`` of a padding scenario's ``--steps`` batches (see
    :func:`_dataset_class`), with ``--workers`` workers (forked: they make host tensors only)."""
    from torch.utils.data import DataLoader

    workers = max(0, int(getattr(args, "workers", 0) or 0))
    data = _dataset_class()(plan, args.steps, args.seed, vocab, rows, row_len, collate,
                            to_batch, stage or (lambda batch: batch))
    extra: dict[str, Any] = {"multiprocessing_context": "fork", "prefetch_factor": 4} \
        if workers else {}
    return DataLoader(data, batch_size=None, num_workers=workers,
                      pin_memory=pin_memory and workers > 0, **extra)


def run_length_steps(args: argparse.Namespace, runtime: lazyscope.Runtime, plan: PaddingPlan, *,
                     vocab: int, rows: int, row_len: int, collate: Any,
                     to_batch: Any, inputs: Any, forward: Any, opt: Any, stage: Any = None,
                     padded: bool = True) -> StepsRun:
    """The padding scenarios' step loop: ``--steps`` steps over the plan's length stream (its
    batches, or the packer's rows). Each batch of random documents is made by a ``DataLoader``
    (:func:`length_batches`: the policy's collator, then ``stage``, the model's host tensors;
    in the loop's thread, or in ``--workers`` processes ahead of it) and annotated (real and
    computed tokens, lengths); then one step: the model's inputs on the device
    (``inputs(batch)``), ``forward(inputs)`` (the loss) and, with an optimizer, backward and the
    optimizer step, each in its region. The wait for the batch is the step's input time."""
    import time

    import torch

    on_cuda = getattr(runtime, "device_name", None) == "cuda"
    loader = length_batches(args, plan, vocab=vocab, rows=rows, row_len=row_len,
                            collate=collate, to_batch=to_batch, stage=stage,
                            pin_memory=on_cuda)
    real_total = computed_total = 0
    loss = None
    t0 = time.perf_counter()
    batches = iter(loader)
    for i in range(args.steps):
        batch = next(batches)
        seq_len = batch.seq_len
        real = sum(batch.lengths)
        computed = batch.rows * seq_len if padded else real
        real_total += real
        computed_total += computed
        lazyscope.annotate_step(real_tokens=real, computed_tokens=computed,
                                seq_len=seq_len if padded else real,
                                batch_max_len=max(batch.lengths), rows=batch.rows,
                                lengths=list(batch.lengths))
        with runtime.step(i, "train_step" if opt is not None else "eval_step"):
            x = inputs(batch)
            if opt is not None:
                with runtime.region("forward"):
                    loss = forward(x)
                with runtime.region("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                with runtime.region("optimizer"):
                    opt.step()
            else:
                with torch.no_grad(), runtime.region("forward"):
                    loss = forward(x)
    final = float(loss.item()) if loss is not None else float("nan")  # waits for the device
    return StepsRun(real_total, computed_total, time.perf_counter() - t0, final)


def steps_line(head: str, args: argparse.Namespace, policy: Policy, run: StepsRun,
               attention: str) -> str:
    """The line a padding scenario ends with: what ran, tokens/s, padding efficiency, loss."""
    resolved = f" ({policy.label()})" if args.padding in ("auto", "bucket:auto") else ""
    return (f"{head} {args.preset} {args.mode} padding={args.padding}{resolved} "
            f"batching={'grouped' if policy.grouped else 'random'} "
            f"attention={attention}: {args.steps} steps in {run.wall_s:.1f} s, "
            f"{run.real_tokens / run.wall_s:.0f} real tokens/s, padding efficiency "
            f"{run.real_tokens / max(1, run.computed_tokens):.2f}, "
            f"buckets {list(policy.boundaries) or '-'}, loss {run.loss:.3f}")
