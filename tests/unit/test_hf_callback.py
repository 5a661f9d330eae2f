"""LazyscopeCallback's logic without transformers: the Trainer's events are called by hand, as
CallbackHandler.call_event calls them, on the eager backend with a real torch module (the real
Trainer on XLA is tests/integration/test_hf_callback.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from lazyscope.backends.base import active
from lazyscope.core.errors import RunDirError, UsageError
from lazyscope.integrations.transformers import NO_TRAIN_END, LazyscopeCallback
from lazyscope.store import load_run


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, 4)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.embed(input_ids).sum()


def _args(**kw) -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cpu"), torch_compile=False, optim="adamw_torch",
                           gradient_accumulation_steps=kw.get("ga", 1),
                           per_device_train_batch_size=2, world_size=1)


def _train(cb: LazyscopeCallback, model: Tiny, steps: int, ga: int = 1,
           end: bool = True) -> None:
    """What Trainer._inner_training_loop calls, in its order."""
    args, control = _args(ga=ga), SimpleNamespace()
    state = SimpleNamespace(global_step=0, max_steps=steps)
    events = dict(model=model, processing_class=None, optimizer=None, lr_scheduler=None,
                  train_dataloader=None, eval_dataloader=None)
    cb.on_train_begin(args, state, control, **events)
    cb.on_epoch_begin(args, state, control, **events)
    for step in range(steps):
        cb.on_step_begin(args, state, control, **events)
        for micro in range(ga):
            model.train()
            model(input_ids=torch.zeros(2, 3 + step, dtype=torch.long))
            if micro < ga - 1:
                cb.on_substep_end(args, state, control, **events)
        cb.on_pre_optimizer_step(args, state, control, **events)
        cb.on_optimizer_step(args, state, control, **events)
        state.global_step += 1
        cb.on_step_end(args, state, control, **events)
        cb.on_log(args, state, control, logs={"loss": 1.0}, **events)
        model.eval()
        model(input_ids=torch.zeros(5, 7, dtype=torch.long))  # evaluation: not counted
    cb.on_epoch_end(args, state, control, **events)
    if end:
        cb.on_train_end(args, state, control, **events)


def test_steps_and_batch_shapes(tmp_path: Path) -> None:
    cb = LazyscopeCallback(out=tmp_path / "run")
    model = Tiny()
    _train(cb, model, steps=3, ga=2)
    assert active() is None and not model._forward_pre_hooks  # all undone
    run = load_run(tmp_path / "run")
    assert run.status == "ok" and run.meta.backend == "eager" and len(run.steps) == 3
    assert run.meta.target == "transformers Trainer (Tiny)"
    ann = run.steps.annotations
    assert [ann[i]["trainer_step"] for i in range(3)] == [1, 2, 3]
    assert [(ann[i]["rows"], ann[i]["seq_len"], ann[i]["computed_tokens"]) for i in range(3)] \
        == [(4, 3, 12), (4, 4, 16), (4, 5, 20)]  # two micro-batches of 2 rows each
    assert run.meta.info["trainer"]["gradient_accumulation_steps"] == 2
    assert cb.run_dir == str(tmp_path / "run")


def test_unhandled_events_are_no_ops_and_other_attributes_are_not(tmp_path: Path) -> None:
    cb = LazyscopeCallback(out=tmp_path / "run")
    assert cb.on_some_future_event(None, None, None, model=None) is None
    with pytest.raises(AttributeError):
        cb.not_an_event  # noqa: B018


def test_training_that_raised_is_finalised_failed(tmp_path: Path) -> None:
    cb = LazyscopeCallback(out=tmp_path / "run", force=True)
    _train(cb, Tiny(), steps=2, end=False)  # train() raised: no on_train_end
    assert active() is not None
    first = load_run(tmp_path / "run")
    assert first.status == "running"  # still being written as far as the disk knows
    cb2_dir = tmp_path / "again"
    cb.out = cb2_dir  # the user trains again with the same callback
    _train(cb, Tiny(), steps=1)
    first = load_run(tmp_path / "run")
    assert first.status == "failed" and NO_TRAIN_END in (first.meta.error or "")
    assert len(first.steps) == 2
    assert load_run(cb2_dir).status == "ok"


def test_refusals(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError):
        LazyscopeCallback(out=tmp_path / "taken")  # before the Trainer loads anything
    with pytest.raises(UsageError, match="unknown backend 'tpu9'"):
        LazyscopeCallback(out=tmp_path / "x", backend="tpu9")
    import lazyscope

    with lazyscope.trace(tmp_path / "outer", backend="eager", device="cpu"):
        cb = LazyscopeCallback(out=tmp_path / "inner")
        with pytest.raises(UsageError, match="already running"):
            _train(cb, Tiny(), steps=1)
    assert not (tmp_path / "inner").exists()
