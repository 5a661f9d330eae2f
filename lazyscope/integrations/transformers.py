"""Hugging Face ``Trainer``: trace ``trainer.train()`` from a callback.

::

    from lazyscope.integrations.transformers import LazyscopeCallback
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[LazyscopeCallback(out="runs/trainer")])
    trainer.train()                       # writes runs/trainer, a normal run
    print(lazyscope.report("runs/trainer"))

For users who cannot wrap ``trainer.train()`` in ``lazyscope trace`` (a notebook, a launcher):
the callback traces from ``on_train_begin`` to ``on_train_end`` with the machinery of
``lazyscope.trace()`` (:func:`lazyscope.backends.runner.api_tracer`) and writes a normal run directory
(``OUT/rank<N>`` under a launcher that sets ``RANK``).

Steps are the Trainer's optimizer steps, and on XLA still the program's own barriers.
``Trainer`` on XLA never calls ``torch_xla.sync()`` inside a step: accelerate wraps its data
loader in torch_xla's ``MpDeviceLoader``, whose ``next()`` syncs before each batch
(transformers 5 ``trainer.py``: "PyTorch/XLA relies on the dataloader to insert mark_step each
iteration"); ``_run_epoch`` syncs once more after its loop (``xm.mark_step()``) and
``_maybe_log_save_evaluate`` before it logs; evaluation syncs per batch. So the graph of
optimizer step *k* (``on_step_begin`` .. ``on_step_end``: its forward, backward and optimizer
step, every micro-batch of gradient accumulation included) is cut and run at the first barrier
*after* ``on_step_end`` (fetching the next batch, or the loop's final sync), and traced by
``lazyscope trace`` the run would have one step more than the Trainer: the first batch's fetch
ends a step of set-up work before any optimizer step. The callback does not add a barrier (that
would change the program's graphs); it gives the XLA collector a step gate
(``Collector.step_gate``): **the first barrier after each ``on_step_end`` ends a step; any
other barrier (the first fetch, the fetches of gradient-accumulation micro-batches, logging's
sync, evaluation's) does not, and its work counts in the step that ends next.** The run's
steps are then exactly ``state.global_step`` of this ``train()`` call, each ending where its
graph was cut. On the eager and compile backends (a CPU or CUDA Trainer) steps end at
``on_step_end`` (``lazyscope.barrier()``'s place: on CUDA it synchronises first).

Each step is annotated with ``trainer_step`` (``state.global_step``) and, where the batch tells
by its shape alone, ``rows``, ``seq_len`` and ``computed_tokens`` (rows x sequence length of
``input_ids``, padding included, summed over micro-batches) from a forward pre-hook on the model
that reads tensor shapes only, never a value on the device (which would be a host sync).

Create the callback before the ``Trainer`` (as ``callbacks=[...]`` does) and before anything
moves to the XLA device: XLA reads its HLO-dump flags when its client starts, so the callback
points them at its dump directory when it is made (each compiled graph's inputs explain a
recompilation); made later, the run says that no input shapes were recorded.

transformers is never imported here: the Trainer calls ``on_<event>(args, state, control,
**kwargs)`` on any object in ``callbacks``, and this class answers every such event it does not
handle with a no-op. If ``train()`` raises, the Trainer calls no ``on_train_end``: the run is
finalised as ``failed`` at the next ``on_train_begin`` or when the process exits.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
from collections.abc import Callable
from typing import Any

from lazyscope.backends import BACKENDS
from lazyscope.backends.base import TraceOptions, active
from lazyscope.backends.runner import Tracer, api_tracer, ranked_out
from lazyscope.backends.xla.session import session as xla_session
from lazyscope.core.errors import UsageError
from lazyscope.store import check_run_dir

#: what the Trainer ended without: the error a dangling run is finalised with
NO_TRAIN_END = "Trainer.train() ended without on_train_end (it raised, or was interrupted)"


class TrainingAborted(RuntimeError):
    """How a run whose ``train()`` never reached ``on_train_end`` is recorded."""


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class LazyscopeCallback:
    """A ``transformers.TrainerCallback`` that traces training into the run directory ``out``
    (see the module docstring). ``backend``: ``xla``, ``eager`` or ``compile``; default: the
    Trainer's (``xla`` on an XLA device, ``compile`` with ``torch_compile=True``, else
    ``eager``). ``force`` replaces an existing run directory, as ``lazyscope trace --force``."""

    def __init__(self, out: str | os.PathLike[str], *, backend: str | None = None,
                 force: bool = False, graph_shapes: bool = True,
                 warmup_steps: int | None = None, name: str = ""):
        if backend is not None and backend not in BACKENDS:
            raise UsageError(f"unknown backend {backend!r}; backends: "
                             f"{', '.join(sorted(BACKENDS))}")
        check_run_dir(ranked_out(out)[0], force)  # before the Trainer loads anything
        if backend in (None, "xla") and graph_shapes and importlib.util.find_spec("torch_xla"):
            # XLA reads its dump flags when its client starts, which the Trainer does (moving
            # the model to the device) before on_train_begin: the process's XLA session sets
            # them (and torch_xla's debug settings) now
            xla_session(graph_shapes)
        self.out = out
        self.backend = backend
        self.force = force
        self.graph_shapes = graph_shapes
        self.warmup_steps = warmup_steps
        self.name = name
        self.tracer: Tracer | None = None
        #: the run directory written by the last train() (after on_train_end)
        self.run_dir: str | None = None
        self._step_ended = False
        self._hook: Any = None
        self._batch = {"rows": 0, "computed_tokens": 0, "seq_len": 0}
        self._atexit = False

    # -- the Trainer's events ------------------------------------------------------------
    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("on_"):  # every event this callback does not handle
            return _noop
        raise AttributeError(name)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracer is not None:  # the last train() raised: its run ends failed
            self._finish(TrainingAborted(NO_TRAIN_END))
        if active() is not None:
            raise UsageError("a lazyscope trace is already running in this process (lazyscope "
                             "trace, lazyscope.trace() or another LazyscopeCallback): trace the "
                             "training once")
        backend = self.backend or _backend_of(args)
        device = getattr(getattr(args, "device", None), "type", "cpu")
        options = TraceOptions(backend=backend, graph_shapes=self.graph_shapes,
                               device="cuda" if device == "cuda" else "cpu",
                               warmup_steps=self.warmup_steps)
        model = kwargs.get("model")
        target = self.name or f"transformers Trainer ({type(model).__name__})"
        tracer = api_tracer(self.out, options=options, force=self.force, target=target)
        tracer.__enter__()
        self.tracer = tracer
        self.run_dir = str(tracer.out)
        if not self._atexit:
            atexit.register(self._at_exit)
            self._atexit = True
        if backend == "xla":
            self._step_ended = False
            tracer.collector.step_gate = self._gate
        assert tracer.recorder is not None
        optim = getattr(args, "optim", "")
        tracer.recorder.set_run_info(trainer={
            "max_steps": getattr(state, "max_steps", None),
            "gradient_accumulation_steps": getattr(args, "gradient_accumulation_steps", None),
            "per_device_train_batch_size": getattr(args, "per_device_train_batch_size", None),
            "optim": str(getattr(optim, "value", optim)),  # an OptimizerNames enum
            "world_size": getattr(args, "world_size", None),
            "first_global_step": getattr(state, "global_step", None),
        })
        if model is not None and hasattr(model, "register_forward_pre_hook"):
            self._hook = model.register_forward_pre_hook(self._on_forward, with_kwargs=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        tracer = self.tracer
        if tracer is None or tracer.recorder is None:
            return
        values: dict[str, Any] = {"trainer_step": int(getattr(state, "global_step", 0))}
        values.update({k: v for k, v in self._batch.items() if v})
        self._batch = dict.fromkeys(self._batch, 0)
        tracer.recorder.annotate(**values)
        if tracer.collector.name == "xla":
            self._step_ended = True  # the next barrier ends this step (see the docstring)
        else:
            tracer.collector.on_user_barrier()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._finish(None)

    # -- machinery -------------------------------------------------------------------------
    def _gate(self) -> bool:
        ended, self._step_ended = self._step_ended, False
        return ended

    def _on_forward(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Count the batch by the shape of ``input_ids`` (or ``inputs_embeds``): no value is
        read from the device."""
        if not getattr(module, "training", False):
            return  # evaluation
        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        shape = tuple(getattr(ids, "shape", ()) or ())
        if not shape:
            embeds = kwargs.get("inputs_embeds")
            shape = tuple(getattr(embeds, "shape", ()) or ())[:-1]
        if len(shape) < 1:
            return
        self._batch["rows"] += int(shape[0])
        self._batch["computed_tokens"] += int(math.prod(shape))
        self._batch["seq_len"] = max(self._batch["seq_len"], int(shape[-1]))

    def _finish(self, error: BaseException | None) -> None:
        tracer, self.tracer = self.tracer, None
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if tracer is None:
            return
        tracer.collector.step_gate = None
        if error is None:
            tracer.__exit__(None, None, None)
        else:
            tracer.__exit__(type(error), error, None)

    def _at_exit(self) -> None:
        if self.tracer is not None:
            self._finish(TrainingAborted(NO_TRAIN_END))


def _backend_of(args: Any) -> str:
    device = getattr(getattr(args, "device", None), "type", "")
    if device == "xla":
        return "xla"
    return "compile" if getattr(args, "torch_compile", False) else "eager"


__all__ = ["LazyscopeCallback"]
