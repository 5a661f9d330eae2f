"""What a run's ``meta.json`` ``info`` says, typed: :class:`RunInfo` (lazyscope's own keys) and
:class:`Workload` (what the program said of its data and model), decoded here and nowhere else.

``info`` stays one flat JSON object on disk (runs of every lazyscope release read the same):
lazyscope's collectors, the runner and :mod:`lazyscope.data` write their keys into it as the run
goes, each through :func:`info_fields` (a field of :class:`RunInfo`, with its declared type: never
a bare string key), and a program adds its own (``lazyscope.set_info``). :func:`run_info` reads it back: each
known key is taken when its value has the declared type, else it reads as not recorded (a run
file is data, never trusted); every other key is the program's, kept apart in ``RunInfo.user``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from lazyscope.model.codec import _checkers, lenient
from lazyscope.model.frames import SOURCES_KEY, Frame, SourceMap

#: the info key :class:`lazyscope.data.PadToBuckets` declares its bucket lengths under
DECLARED_BUCKETS = "declared_buckets"
#: the info key the runner records the program's line an exception ended the run at under
#: (``{"file", "line", "function"}``: the innermost user frame of its traceback)
ERROR_SITE = "error_site"
#: info keys that give the longest length a batch may hold, the first one set wins
LARGEST_KEYS = ("max_len", "max_length", "model_max_length")


@dataclass(frozen=True)
class Workload:
    """What the program (a scenario, ``lazyscope.set_info``) said of its data and model."""

    #: sequences per batch
    batch: int | None = None
    #: the longest length a batch may hold (``max_len``, ``max_length`` or ``model_max_length``)
    max_len: int | None = None
    #: the padding policy it ran: ``longest``, ``packed``, ``auto`` ..., and what ``auto``
    #: resolved to
    policy: str | None = None
    resolved_policy: str | None = None
    #: the bucket lengths it pads to
    buckets: list[int] | None = None
    #: ``grouped``: batches formed inside buckets
    batching: str | None = None
    #: packed rows: ``[rows, row_len]``
    packed_rows: list[int] | None = None
    #: the model's width, depth and vocabulary (the cost model's quadratic term)
    dim: float | None = None
    layers: float | None = None
    vocab: float | None = None
    #: the steps the user's whole run will take
    planned_steps: int | None = None


@dataclass(frozen=True)
class RunInfo:
    """lazyscope's own keys of ``info``, the program's workload, and the rest (``user``)."""

    #: XLA: each compiled graph's inputs were recorded (``--graph-shapes``)
    graph_shapes: bool = True
    #: the profile window's outcome (``captured_steps``, ``error`` ...)
    profile: dict[str, Any] | None = None
    #: the backend's own counters at the end of the run (torch_xla's metrics)
    runtime_counts: dict[str, Any] | None = None
    #: XLA ran eagerly (``torch_xla.experimental.eager_mode``)
    eager_mode: bool = False
    #: SPMD: one process drives every device
    spmd: bool = False
    global_devices: int | None = None
    #: the bucket lengths :class:`lazyscope.data.PadToBuckets` declared under the trace
    declared_buckets: list[int] | None = None
    #: the ranks a spawning parent started
    ranks: list[int] | None = None
    #: the runtime counters dropped from ``runtime_counts`` for holding no count (negative, not
    #: a number: a damaged file), with the values they held
    damaged_counts: dict[str, Any] = field(default_factory=dict)
    #: lines the program and the backend noted as it ran
    notes: list[str] = field(default_factory=list)
    #: what the loader watch saw of each data loader (its collate function, token counts)
    loaders: list[dict[str, Any]] | None = None
    #: errors raised in loader worker threads
    thread_errors: list[dict[str, Any]] | None = None
    #: the persistent compilation cache (:mod:`lazyscope.backends.compile_cache`): ``kind``
    #: (xla / inductor), ``configured``, ``path``, ``entries_before``, ``hits``, ``misses`` ...
    compile_cache: dict[str, Any] | None = None
    #: the program waited for its batches in torch_xla's parallel loader (``MpDeviceLoader``)
    parallel_loader: bool = False
    #: the step thread's stack, sampled (:mod:`lazyscope.backends.sampler`): ``hz``,
    #: ``total``, samples per step part (``phases``) and per user line (``lines``: part, file,
    #: line, function, samples)
    samples: dict[str, Any] | None = None
    #: the process's CPU seconds and the machine's busy seconds at sampled step barriers
    #: (``lazyscope.backends.hostclock``: ``{"cpus": N, "samples": [[step, cpu_s, busy_s,
    #: wall_s], ...]}``)
    host_clock: dict[str, Any] | None = None
    #: the device's memory at each barrier, where the runtime reports it (``used``, ``peak``,
    #: ``limit`` ...), or why not (``unmeasured``)
    device_memory: dict[str, Any] | None = None
    #: the out-of-memory error the program stopped on, parsed (kind, sizes, its site)
    out_of_memory: dict[str, Any] | None = None
    #: the program's line the exception that ended the run raised at (:data:`ERROR_SITE`)
    error_site: dict[str, Any] | None = None
    #: eager PyTorch / torch.compile: the device the program ran on (``cuda:0``, ``cpu``)
    torch_device: str | None = None
    #: torch.compile's ``dynamic`` as traced (``auto``, ``true``, ``false``)
    compile_dynamic: str | None = None
    #: torchax: what a step was (``mode``: ``jit`` or ``barrier``; ``function``: the jitted
    #: callable whose calls end steps; ``calls`` per jitted function)
    torchax_steps: dict[str, Any] | None = None
    #: torchax: JAX's device count
    devices: int | None = None
    #: a Hugging Face ``Trainer``'s own plan (``max_steps``, gradient accumulation, batch size)
    trainer: dict[str, Any] | None = None
    sources: SourceMap = field(default_factory=SourceMap)
    workload: Workload = field(default_factory=Workload)
    #: every key that is neither lazyscope's nor the workload's, as the program set it
    user: dict[str, Any] = field(default_factory=dict)

    @property
    def error_frame(self) -> Frame | None:
        """:attr:`error_site` as a user frame; None when not recorded or not a place."""
        site = self.error_site or {}
        file, line, function = site.get("file"), site.get("line"), site.get("function", "")
        if not isinstance(file, str) or not file or isinstance(line, bool) \
                or not isinstance(line, int) or line <= 0:
            return None
        return Frame(file, line, function if isinstance(function, str) else "")


_OWN = frozenset(f.name for f in fields(RunInfo)) - {"sources", "workload", "user",
                                                    "damaged_counts"}
_WORKLOAD = frozenset(f.name for f in fields(Workload)) - {"max_len"}


def info_fields(**values: Any) -> dict[str, Any]:
    """``values`` as ``meta.json`` ``info`` entries, checked against :class:`RunInfo`: how
    lazyscope's own code writes run info. A name that is not one of RunInfo's own fields, or a
    value :func:`run_info` would not read back as that field (its declared type), raises
    TypeError: a bug of lazyscope's, which the tests meet, never a run file read as missing."""
    checks = dict(_checkers(RunInfo))
    for name, value in values.items():
        check = checks.get(name)
        if name not in _OWN or check is None:
            raise TypeError(f"run info {name!r} is not a field of RunInfo")
        if not check(value):
            raise TypeError(f"run info {name!r}: {value!r:.120} does not have RunInfo's "
                            "declared type")
    return values


def run_info(info: Any) -> RunInfo:
    """``meta.json`` ``info`` decoded (see the module docstring); never raises."""
    if not isinstance(info, dict):
        return RunInfo()
    own = lenient(RunInfo, {k: v for k, v in info.items() if k in _OWN})
    notes = info.get("notes")
    if notes:  # lines, however the program wrote them (one string, numbers)
        own = _with(own, notes=[str(n) for n in notes] if isinstance(notes, list)
                    else [str(notes)])
    largest = next((v for k in LARGEST_KEYS if isinstance(v := info.get(k), int)
                    and not isinstance(v, bool) and v > 0), None)
    work = lenient(Workload, {**{k: v for k, v in info.items() if k in _WORKLOAD},
                              "max_len": largest})
    counts = own.runtime_counts
    if counts is not None:  # only counts: a negative or non-number value is damage, dropped
        own = _with(own, runtime_counts={k: v for k, v in counts.items() if is_count(v)},
                    damaged_counts={k: v for k, v in counts.items() if not is_count(v)})
    known = _OWN | _WORKLOAD | set(LARGEST_KEYS) | {SOURCES_KEY}
    return _with(own, sources=SourceMap.from_json(info.get(SOURCES_KEY)), workload=work,
                 user={k: v for k, v in info.items() if k not in known})


def is_count(value: Any) -> bool:
    """A counter's value as a backend records it: a number in 0 .. 2^63."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 2 ** 63


def _with(obj: RunInfo, **changes: Any) -> RunInfo:
    from dataclasses import replace

    return replace(obj, **changes)
