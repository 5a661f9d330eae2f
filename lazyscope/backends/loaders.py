"""Where batch shapes are made: every ``torch.utils.data.DataLoader`` the traced program
iterates, with the line that made it, its collate function and the shapes of its batches.

A graph recompiled for each new sequence length is fixed where the length is made, which is
rarely where the batch enters the device: a ``collate_fn`` that pads each batch to its longest
example, a Hugging Face ``DataCollatorWithPadding`` given to a ``Trainer``. While a trace is
active, this watch wraps

* ``DataLoader.__init__``: the Python stack of the call that made the loader (accelerate's and
  transformers' own loaders included: the user's frames are below theirs);
* ``DataLoader.__iter__``: the iterator it returns knows its loader;
* ``_BaseDataLoaderIter.__next__``: the shapes of the batch it returns (the sizes of every
  tensor, found in dicts, lists and tuples; never a value, so never a device sync), in the
  main process whether the loader has workers or not (torch_xla's ``MpDeviceLoader`` iterates
  it in a thread: recorded under a lock); and how long the call took, which on the program's
  step thread is the time the step waited for its data (the step's ``input_s``; the time spent
  looking at the batch is lazyscope's own, ``own_s``).

At the end of the trace each loader that yielded a batch is written to ``meta.json`` info
:data:`LOADERS`: its collate function (a function of the user's with its ``def`` line, or a
library object by class, module and package version), the stack that made it, how many batches
it yielded, the last batch's shapes (what the data is: one label a sequence or a token), how
many of its batches were followed by a backward pass before the next (``trained``: the loader
that feeds the training step has them, an evaluation loader none; ``torch.autograd.backward``
is counted while the trace is active) and, for each tensor of the batch whose size varied, the
sizes each varying dimension took. The analysis matches a recompiled family's varying sizes against them
(:func:`lazyscope.analyze.makers.shape_maker`). Where a batch still on the CPU says which of
its positions are padding (:func:`batch_tokens`), its real and padded tokens are counted too:
the run's measured padding efficiency and real tokens per second
(:func:`lazyscope.analyze.tokens.measured_tokens`). Everything is restored when the trace ends.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from lazyscope.backends.base import active
from lazyscope.backends.sampler import mark
from lazyscope.model.ownership import capture_stack, is_library_file

#: ``meta.json`` info key: the loaders a run iterated (see the module docstring)
LOADERS = "loaders"
#: ``meta.json`` info key: exceptions that ended a thread of the program (a loader's thread)
THREAD_ERRORS = "thread_errors"
#: tensors of a batch looked at, at most (a batch is walked this deep)
MAX_TENSORS = 16
MAX_DEPTH = 3
#: distinct sizes kept per varying dimension
MAX_SIZES = 256
#: batches whose real and padded token counts are kept one by one (totals go on beyond)
MAX_TOKEN_BATCHES = 20_000
#: the label that marks a position no loss is computed on (torch's ``ignore_index``)
IGNORE_INDEX = -100


def batch_shapes(batch: Any) -> dict[str, tuple[int, ...]]:
    """``{key path: shape}`` of the tensors in a batch (``input_ids``, ``[0]``, ``x.mask``)."""
    out: dict[str, tuple[int, ...]] = {}

    def walk(obj: Any, path: str, depth: int) -> None:
        if len(out) >= MAX_TENSORS or depth > MAX_DEPTH:
            return
        shape = getattr(obj, "shape", None)
        if shape is not None and hasattr(obj, "dtype") and not isinstance(obj, type):
            try:
                out[path or "batch"] = tuple(int(d) for d in shape)
            except (TypeError, ValueError):  # a symbolic size
                pass
            return
        if isinstance(obj, Mapping):
            for k, v in list(obj.items())[:MAX_TENSORS]:
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj[:MAX_TENSORS]):
                walk(v, f"{path}[{i}]", depth + 1)

    walk(batch, "", 0)
    return out


def _matrix(obj: Any) -> Any:
    """``obj`` when it is a 2-D tensor on the CPU (its values cost no device sync), else None."""
    shape = getattr(obj, "shape", None)
    device = getattr(obj, "device", None)
    if shape is None or len(shape) != 2 or getattr(device, "type", None) != "cpu":
        return None
    return obj


def batch_tokens(batch: Any) -> tuple[int, int, str] | None:
    """``(real tokens, padded tokens, how counted)`` of a collated batch still on the CPU, or
    None where the batch does not say which of its positions are padding: the ``(B, L)``
    ``attention_mask``'s ones; else the ``document_ids`` of packed rows (-1 on padding); else the
    ``labels`` that are not -100 where they have ``input_ids``' shape; else the nonzero ids of
    an integer matrix, the batch or a ``(tokens, ...)`` tuple's first (``pad_sequence`` pads
    with 0).
    Reading CPU tensors never syncs a device; a batch already on the device is not read."""
    if isinstance(batch, Mapping):
        mask = _matrix(batch.get("attention_mask"))
        if mask is not None:
            return int(mask.count_nonzero()), int(mask.numel()), "attention_mask"
        docs = _matrix(batch.get("document_ids"))
        if docs is not None:
            return int((docs >= 0).sum()), int(docs.numel()), "document_ids"
        ids, labels = _matrix(batch.get("input_ids")), _matrix(batch.get("labels"))
        if ids is not None and labels is not None and tuple(ids.shape) == tuple(labels.shape):
            return (int((labels != IGNORE_INDEX).sum()), int(labels.numel()),
                    "labels other than -100")
        return None
    first = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    if first is not None:
        ids = _matrix(first)
        if ids is not None and not ids.dtype.is_floating_point and str(ids.dtype) != "torch.bool":
            return int(ids.count_nonzero()), int(ids.numel()), "nonzero token ids"
    return None


#: a collator object's padding settings worth recording (Hugging Face's padding collators)
PADDING_SETTINGS = ("pad_to_multiple_of", "max_length", "padding")
#: attributes through which a library's wrapper holds the collator it calls (transformers'
#: ``RemoveColumnsCollator``, which a Trainer puts around the ``data_collator`` it was given)
WRAPPED = ("data_collator", "collate_fn")


def accepts(cls: type) -> list[str] | None:
    """The keyword arguments the installed class ``cls`` takes (its ``__init__``'s, and its
    bases' where it passes ``**kwargs`` on), sorted; None when its signature cannot be read.
    What a fix may say to add to the user's call: never an argument this list lacks."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None or klass is object:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            return None
        names |= {p.name for p in params if p.name != "self" and p.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            break
    return sorted(names)


def collate_info(fn: Any) -> dict[str, Any]:
    """What a collate function is: ``name``, ``module``, ``file`` and ``line`` (its ``def``, or
    its class's), and for a library object its package and version and the keyword arguments
    its installed class takes (``accepts``, :func:`accepts`). A partial is its function; a
    library's wrapper is the collator it wraps."""
    for _ in range(4):
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        inner = next((getattr(fn, a) for a in WRAPPED
                      if callable(getattr(fn, a, None)) and not inspect.isroutine(fn)), None)
        if inner is None or inner is fn:
            break
        fn = inner
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", "?")
    module = getattr(target, "__module__", "") or ""
    info: dict[str, Any] = {"name": str(name), "module": module,
                            "object": not (inspect.isfunction(fn) or inspect.ismethod(fn))}
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None and info["object"]:
        call = vars(type(fn)).get("__call__") or type(fn).__call__
        code = getattr(call, "__code__", None)
        try:
            info["class_line"] = inspect.getsourcelines(type(fn))[1]
        except (OSError, TypeError):
            pass
    if code is not None:
        info["file"], info["line"] = code.co_filename, code.co_firstlineno
        info["library"] = is_library_file(code.co_filename)
    package = module.split(".")[0]
    version = getattr(sys.modules.get(package), "__version__", None)
    if package and version:
        info["package"], info["version"] = package, str(version)
    if info["object"]:
        accepted = accepts(type(fn))
        if accepted is not None:
            info["accepts"] = accepted
    # how a Hugging Face padding collator pads: a multiple bounds the shapes it can make
    for attr in PADDING_SETTINGS:
        value = getattr(fn, attr, None) if info["object"] else None
        if isinstance(value, (int, str, bool)) and not isinstance(value, type):
            info[attr] = value
    return info


def loader_settings(loader: Any) -> dict[str, Any]:
    """How a ``DataLoader`` makes its batches: ``num_workers``, ``pin_memory``,
    ``persistent_workers``, ``prefetch_factor``, ``batch_size``, and its dataset: the class, and
    the ``def`` line of the method that makes a sample (``__getitem__``, or ``__iter__`` for an
    iterable dataset), which is where an input-bound loop's time goes without workers."""
    out: dict[str, Any] = {}
    for attr in ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor",
                 "batch_size", "drop_last"):
        value = getattr(loader, attr, None)
        if isinstance(value, (int, bool)) or value is None:
            out[attr] = value
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        cls = type(dataset)
        out["dataset"] = cls.__qualname__
        for method in ("__getitem__", "__iter__"):
            fn = getattr(cls, method, None)
            code = getattr(fn, "__code__", None)
            if code is not None and not is_library_file(code.co_filename):
                out["sample_at"] = [code.co_filename, code.co_firstlineno, method]
                break
    return out


class _Loader:
    __slots__ = ("made_at", "collate", "batches", "sizes", "last", "real", "padded", "counted",
                 "real_total", "padded_total", "counted_by", "waited", "settings", "trained",
                 "backwards")

    def __init__(self, made_at: Any, collate: dict[str, Any]):
        self.made_at = made_at
        self.collate = collate
        #: seconds the program's step thread waited in this loader's ``__next__``
        self.waited = 0.0
        self.settings: dict[str, Any] = {}
        self.batches = 0
        #: batches after which a backward pass ran before the next one (a training loader's);
        #: the backward passes counted at its last batch
        self.trained = 0
        self.backwards: int | None = None
        #: key path -> dim -> distinct sizes, in order of appearance
        self.sizes: dict[str, dict[int, list[int]]] = {}
        #: the last batch's shapes: what the data is (one label a sequence, or a token)
        self.last: dict[str, tuple[int, ...]] = {}
        #: each batch's real and padded tokens (the first MAX_TOKEN_BATCHES), while every
        #: batch so far could be counted; their totals over every batch counted
        self.real: list[int] = []
        self.padded: list[int] = []
        self.counted = 0
        self.real_total = 0
        self.padded_total = 0
        self.counted_by = ""

    def add(self, shapes: dict[str, tuple[int, ...]],
            tokens: tuple[int, int, str] | None = None) -> None:
        self.batches += 1
        self.last = shapes
        if tokens is not None and self.counted == self.batches - 1:
            self.counted += 1
            self.real_total += tokens[0]
            self.padded_total += tokens[1]
            self.counted_by = tokens[2]
            if len(self.real) < MAX_TOKEN_BATCHES:
                self.real.append(tokens[0])
                self.padded.append(tokens[1])
        for key, shape in shapes.items():
            dims = self.sizes.setdefault(key, {})
            for d, n in enumerate(shape):
                seen = dims.setdefault(d, [])
                if n not in seen and len(seen) < MAX_SIZES:
                    seen.append(n)

    def as_info(self) -> dict[str, Any]:
        varying = {key: {str(d): sorted(v) for d, v in dims.items() if len(v) > 1}
                   for key, dims in self.sizes.items()}
        out = {"made_at": [[f.file, f.line, f.function, f.library] for f in self.made_at],
               "collate": self.collate, "batches": self.batches,
               "varying": {k: v for k, v in varying.items() if v},
               "shapes": {k: list(v) for k, v in self.last.items()},
               "waited_s": round(self.waited, 6), "trained": self.trained, **self.settings}
        if self.counted:
            out["tokens"] = {"counted_by": self.counted_by, "batches": self.counted,
                             "real": self.real_total, "padded": self.padded_total,
                             "real_per_batch": self.real, "padded_per_batch": self.padded}
        return out


class LoaderWatch:
    """Installed for the length of a trace (see the module docstring). It also keeps the
    exceptions that end a thread of the program (``threading.excepthook``, which still prints
    them): torch_xla's ``MpDeviceLoader`` fetches batches in a thread, and a collate function
    that raises there ends the data, not the program, which then trains on nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaders: dict[int, _Loader] = {}
        #: id(loader) -> the stack that made it, while the loader lives (a weak reference: a
        #: loader with persistent workers must not outlive the program's last use of it)
        self._made: dict[int, Any] = {}
        self._gone: list[_Loader] = []  # the records of loaders that were collected
        self._saved: list[tuple[Any, str, Any]] = []
        self._hook: Any = None
        self.thread_errors: list[dict[str, Any]] = []
        #: backward passes the program ran (``torch.autograd.backward`` calls)
        self.backwards = 0

    def install(self) -> None:
        self._install_thread_hook()
        self._count_backwards()
        try:
            import torch.utils.data.dataloader as dl
        except ImportError:
            return
        watch = self
        init, iter_, next_ = (dl.DataLoader.__init__, dl.DataLoader.__iter__,
                              dl._BaseDataLoaderIter.__next__)

        @functools.wraps(init)
        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            init(loader, *args, **kwargs)
            try:
                with watch._lock:
                    watch._made[id(loader)] = capture_stack(1)
                weakref.finalize(loader, watch._forget, id(loader))
            except Exception:  # noqa: BLE001 - never break the program's loader
                pass

        @functools.wraps(iter_)
        def __iter__(loader: Any) -> Any:
            it = iter_(loader)
            try:
                it._lazyscope_loader = loader
            except Exception:  # noqa: BLE001
                pass
            return it

        depth = threading.local()

        @functools.wraps(next_)
        def __next__(it: Any) -> Any:
            if getattr(depth, "n", 0):  # a loader iterated inside another's __next__
                return next_(it)
            depth.n = 1
            trace = active()
            t0 = time.perf_counter()
            try:
                if trace is not None and trace.collector.profiling:
                    with trace.collector.span("lazyscope: input wait"):
                        batch = next_(it)
                else:
                    batch = next_(it)
            finally:
                t1 = time.perf_counter()
                depth.n = 0
                waited = watch._waited(t1 - t0)
            try:
                watch._batch(it, batch, waited)
            except Exception:  # noqa: BLE001 - never break the program's loop
                pass
            watch._own(time.perf_counter() - t1)
            return batch

        mark(__next__, "input")

        for owner, name, fn in ((dl.DataLoader, "__init__", __init__),
                                (dl.DataLoader, "__iter__", __iter__),
                                (dl._BaseDataLoaderIter, "__next__", __next__)):
            self._saved.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, fn)

    def _count_backwards(self) -> None:
        """Count the program's backward passes (``loss.backward()`` calls
        ``torch.autograd.backward``): a loader between whose batches one ran feeds the
        training step, and the advice plans for it (not an evaluation loader's)."""
        try:
            import torch.autograd as autograd
        except ImportError:
            return
        backward = autograd.backward
        watch = self

        @functools.wraps(backward)
        def counted(*args: Any, **kwargs: Any) -> Any:
            watch.backwards += 1
            return backward(*args, **kwargs)

        self._saved.append((autograd, "backward", backward))
        autograd.backward = counted  # type: ignore[assignment]

    @staticmethod
    def _waited(seconds: float) -> float:
        """A thread waited ``seconds`` for a batch: on the program's step thread, the step's
        input time (returned; 0 on another thread, a loader's own)."""
        trace = active()
        if trace is None or threading.get_ident() != trace.recorder.step_thread:
            return 0.0
        trace.recorder.add_time("input_s", seconds)
        return seconds

    @staticmethod
    def _own(seconds: float) -> None:
        trace = active()
        if trace is not None:
            trace.recorder.add_time("own_s", seconds)

    def _forget(self, key: int) -> None:
        """The loader is gone: its id may be another's next; its record is kept apart."""
        with self._lock:
            self._made.pop(key, None)
            rec = self._loaders.pop(key, None)
            if rec is not None:
                self._gone.append(rec)

    def remove(self) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved = []
        if self._hook is not None:
            threading.excepthook = self._hook
            self._hook = None

    def _install_thread_hook(self) -> None:
        previous = threading.excepthook
        watch = self

        def excepthook(args: Any) -> None:
            try:
                watch._thread_error(args)
            except Exception:  # noqa: BLE001 - the program's own hook still runs
                pass
            previous(args)

        self._hook = previous
        threading.excepthook = excepthook

    def _thread_error(self, args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        import traceback

        frames = traceback.extract_tb(args.exc_traceback) if args.exc_traceback else []
        user = [f for f in frames if not is_library_file(f.filename)]
        at = user[-1] if user else (frames[-1] if frames else None)
        message = traceback.format_exception_only(args.exc_type, args.exc_value)[-1].strip()
        with self._lock:
            self.thread_errors.append({
                "thread": getattr(args.thread, "name", "?"), "error": message[:300],
                "at": [at.filename, at.lineno or 0, at.name] if at is not None else None})

    def _batch(self, it: Any, batch: Any, waited: float = 0.0) -> None:
        loader = getattr(it, "_lazyscope_loader", None)
        key = id(loader) if loader is not None else id(it)
        shapes = batch_shapes(batch)
        try:
            tokens = batch_tokens(batch)
        except Exception:  # noqa: BLE001 - a batch that cannot be counted is not counted
            tokens = None
        with self._lock:
            rec = self._loaders.get(key)
            if rec is None:
                collate = getattr(loader, "collate_fn", None) or getattr(it, "_collate_fn", None)
                rec = self._loaders[key] = _Loader(self._made.get(key, ()),
                                                   collate_info(collate) if collate else {})
                rec.settings = loader_settings(loader if loader is not None else it)
            rec.add(shapes, tokens)
            rec.waited += waited
            if rec.backwards is not None and self.backwards > rec.backwards:
                rec.trained += 1
            rec.backwards = self.backwards

    def info(self) -> list[dict[str, Any]]:
        """Every loader that yielded a batch, for ``meta.json`` info :data:`LOADERS`."""
        with self._lock:
            return [rec.as_info() for rec in (*self._gone, *self._loaders.values())
                    if rec.batches]
