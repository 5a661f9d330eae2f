"""The run format: what a traced run is, on disk and in memory.

A run is a directory::

    meta.json      what ran, where, with which versions, when, and how it ended (status)
    steps.jsonl    one JSON object per finished step, appended as the step ends
    events.jsonl   one JSON object per event (a compilation, a host sync, a fallback ...)

``steps.jsonl`` and ``events.jsonl`` are append-only, so a run killed at any moment keeps every
finished step. They are written through a shared memory map (see :class:`MappedLog`): a line is in
the kernel's page cache, visible to readers and safe from a kill, the moment it is copied, with
no system call per step; until the writer closes a file it is padded with NUL bytes to the mapped
size, which the loader ignores. ``meta.json`` is replaced atomically; a run whose status is still ``running``
when loaded was killed (``Run.complete`` is False).

Loading is tolerant: missing keys take defaults, a truncated last line (a kill mid-write) is
dropped with a warning. A run written by a newer schema, a missing or unreadable ``meta.json``,
or a corrupt line in the middle of a file raise :class:`~lazyscope.errors.RunDirError`.

This module imports nothing but the standard library.
"""

from __future__ import annotations

import datetime as _dt
import json
import mmap
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from lazyscope.errors import RunDirError

SCHEMA_VERSION = 1
META_FILE = "meta.json"
STEPS_FILE = "steps.jsonl"
EVENTS_FILE = "events.jsonl"
WARMUP_STEPS = 2

STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
STATUSES = (STATUS_RUNNING, STATUS_OK, STATUS_FAILED, STATUS_INTERRUPTED)


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Meta:
    """What ran and how it ended (``meta.json``)."""

    target: str = ""
    target_kind: str = "scenario"  # scenario | script | api
    args: list[str] = field(default_factory=list)
    backend: str = "xla"
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str | None = None
    status: str = STATUS_RUNNING
    error: str | None = None
    steps_requested: int | None = None
    warmup_steps: int = WARMUP_STEPS
    info: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Meta:
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        meta = cls(**kwargs)
        if not isinstance(meta.args, list):
            meta.args = [str(meta.args)]
        meta.args = [str(a) for a in meta.args]
        if not isinstance(meta.info, dict):
            meta.info = {}
        if not isinstance(meta.versions, dict):
            meta.versions = {}
        meta.versions = {str(k): str(v) for k, v in meta.versions.items()}
        # a field of the wrong type is corruption (TypeError -> RunDirError in load_run)
        for name in ("target", "target_kind", "backend", "device", "started_at", "status"):
            if not isinstance(getattr(meta, name), str):
                raise TypeError(f"'{name}' is not a string")
        for name in ("ended_at", "error"):
            if getattr(meta, name) is not None and not isinstance(getattr(meta, name), str):
                raise TypeError(f"'{name}' is not a string")
        for name in ("warmup_steps", "steps_requested"):
            value = getattr(meta, name)
            if (value is not None or name == "warmup_steps") and (
                not isinstance(value, int) or isinstance(value, bool)
            ):
                raise TypeError(f"'{name}' is not an integer")
        return meta


@dataclass
class Step:
    """One step: the work between two step barriers, as deltas of the backend's counters.

    ``kind`` is ``"step"`` for a step that ended at a barrier and ``"tail"`` for work done after
    the last barrier (counted in totals, not in per-step statistics).
    """

    index: int
    wall_s: float = 0.0
    t_end_s: float = 0.0  # seconds since the run started, when the step ended
    compile_count: int = 0
    compile_s: float = 0.0
    graph_hashes: list[str] = field(default_factory=list)
    execute_count: int = 0
    execute_s: float = 0.0
    to_device_count: int = 0
    to_device_bytes: int = 0
    to_device_s: float = 0.0
    from_device_count: int = 0
    from_device_bytes: int = 0
    from_device_s: float = 0.0
    fallback_ops: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    kind: str = "step"

    def to_json(self) -> dict[str, Any]:
        """The on-disk shape: grouped by what was measured."""
        return {
            "step": self.index,
            "kind": self.kind,
            "wall_s": self.wall_s,
            "t_end_s": self.t_end_s,
            "compile": {
                "count": self.compile_count,
                "seconds": self.compile_s,
                "hashes": self.graph_hashes,
            },
            "execute": {"count": self.execute_count, "seconds": self.execute_s},
            "to_device": {
                "count": self.to_device_count,
                "bytes": self.to_device_bytes,
                "seconds": self.to_device_s,
            },
            "from_device": {
                "count": self.from_device_count,
                "bytes": self.from_device_bytes,
                "seconds": self.from_device_s,
            },
            "fallback_ops": self.fallback_ops,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        def group(name: str) -> dict[str, Any]:
            value = data.get(name) or {}
            if not isinstance(value, dict):
                raise ValueError(f"'{name}' is not an object")
            return value

        comp, exe = group("compile"), group("execute")
        to_dev, from_dev = group("to_device"), group("from_device")
        fallback = data.get("fallback_ops") or {}
        extra = data.get("extra") or {}
        if not isinstance(fallback, dict) or not isinstance(extra, dict):
            raise ValueError("'fallback_ops' and 'extra' must be objects")
        return cls(
            index=int(data["step"]),
            kind=str(data.get("kind", "step")),
            wall_s=float(data.get("wall_s", 0.0)),
            t_end_s=float(data.get("t_end_s", 0.0)),
            compile_count=int(comp.get("count", 0)),
            compile_s=float(comp.get("seconds", 0.0)),
            graph_hashes=[str(h) for h in comp.get("hashes", []) or []],
            execute_count=int(exe.get("count", 0)),
            execute_s=float(exe.get("seconds", 0.0)),
            to_device_count=int(to_dev.get("count", 0)),
            to_device_bytes=int(to_dev.get("bytes", 0)),
            to_device_s=float(to_dev.get("seconds", 0.0)),
            from_device_count=int(from_dev.get("count", 0)),
            from_device_bytes=int(from_dev.get("bytes", 0)),
            from_device_s=float(from_dev.get("seconds", 0.0)),
            fallback_ops={str(k): int(v) for k, v in fallback.items()},
            extra=extra,
        )


@dataclass
class Site:
    """A place in the user's source: where a compilation, sync or fallback was triggered."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} ({self.function})" if self.function else where


@dataclass
class Event:
    """Something that happened inside a step (``events.jsonl``).

    ``kind`` is one of ``compile``, ``sync``, ``fallback``, ``graph_break`` ...; ``data`` holds
    the kind's own fields (a graph hash, a cause, input shapes, an op name ...).
    """

    kind: str
    step: int
    seconds: float = 0.0
    site: Site | None = None
    frames: list[Site] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step": self.step,
            "seconds": self.seconds,
            "site": asdict(self.site) if self.site else None,
            "frames": [asdict(f) for f in self.frames],
            "data": self.data,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        def site(value: Any) -> Site | None:
            if not isinstance(value, dict) or "file" not in value:
                return None
            return Site(str(value["file"]), int(value.get("line", 0)), str(value.get("function", "")))

        payload = data.get("data") or {}
        if not isinstance(payload, dict):
            raise ValueError("'data' must be an object")
        return cls(
            kind=str(data["kind"]),
            step=int(data.get("step", -1)),
            seconds=float(data.get("seconds", 0.0)),
            site=site(data.get("site")),
            frames=[s for s in (site(f) for f in data.get("frames") or []) if s is not None],
            data=payload,
        )


@dataclass
class Run:
    """A loaded run: its metadata, its steps (barrier steps only), its tail and its events."""

    path: Path
    meta: Meta
    steps: list[Step]
    events: list[Event] = field(default_factory=list)
    tail: Step | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """False when the run never finalised its metadata (killed, or still running)."""
        return self.meta.status != STATUS_RUNNING

    @property
    def status(self) -> str:
        return self.meta.status if self.complete else "incomplete"

    def all_steps(self) -> list[Step]:
        """Barrier steps plus the tail, for totals."""
        return self.steps + ([self.tail] if self.tail else [])


# --------------------------------------------------------------------------- writing


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a lazyscope run (it has a ``meta.json``)."""
    return (Path(path) / META_FILE).is_file()


def prepare_run_dir(path: Path, force: bool) -> None:
    """Make ``path`` an empty directory for a new run, or refuse.

    An existing non-empty directory is refused without ``force``; with ``force`` it is removed
    only if it is a lazyscope run (never an arbitrary directory), so nothing is half-overwritten.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not force:
            raise RunDirError(f"{path} already exists; pass --force to replace it")
        if not is_run_dir(path):
            raise RunDirError(
                f"{path} is not empty and is not a lazyscope run; refusing to replace it"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)


#: the encoder of steps.jsonl/events.jsonl lines (json.dumps(..., default=str) would build a
#: new encoder for every line: this runs at every step barrier)
_LINE_ENCODER = json.JSONEncoder(default=str)


class MappedLog:
    """An append-only text file written through a shared memory map.

    ``append`` copies the line into the mapping: no system call, yet the bytes are in the page
    cache at once, so another process reading the file sees them and a SIGKILL loses none of
    them (the kernel writes the dirty pages back; only a machine crash could lose them, as with
    an un-fsynced ``write``). A ``write`` + ``flush`` per step costs a system call per step,
    which on a loaded 2-core VM was most of lazyscope's per-step overhead (see
    ``benchmarks/overhead.py``). The mapping grows by doubling; blocks are reserved with
    ``posix_fallocate`` first so a full disk is an ``OSError`` here (and a fallback to plain
    writes), never a SIGBUS on a page write. ``close`` truncates the NUL padding away.
    """

    INITIAL = 1 << 16

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._pos = os.fstat(self._fd).st_size
        self._map: mmap.mmap | None = None
        self._size = 0
        self._fallback: IO[bytes] | None = None
        try:
            self._grow(max(self.INITIAL, self._pos + 1))
        except (OSError, ValueError):
            self._to_fallback()

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def _grow(self, need: int) -> None:
        size = max(self._size * 2, self.INITIAL)
        while size < need:
            size *= 2
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(self._fd, self._size, size - self._size)
        else:  # pragma: no cover - not Linux
            os.ftruncate(self._fd, size)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(self._fd, size)
        self._size = size

    def _to_fallback(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        os.ftruncate(self._fd, self._pos)
        self._fallback = os.fdopen(os.dup(self._fd), "ab")

    def append(self, line: str) -> None:
        data = line.encode("utf-8")
        if self._fallback is None:
            end = self._pos + len(data)
            try:
                if end > self._size:
                    self._grow(end)
                assert self._map is not None
                self._map[self._pos:end] = data
                self._pos = end
                return
            except (OSError, ValueError):
                self._to_fallback()
        assert self._fallback is not None
        self._fallback.write(data)
        self._fallback.flush()
        self._pos += len(data)

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fallback is not None:
            self._fallback.close()
        os.ftruncate(self._fd, self._pos)
        os.close(self._fd)
        self._fd = -1


class RunWriter:
    """Writes a run directory as it happens: steps and events are appended line by line."""

    def __init__(self, path: Path, meta: Meta):
        self.path = Path(path)
        self.meta = meta
        self.path.mkdir(parents=True, exist_ok=True)
        if not meta.started_at:
            meta.started_at = now_iso()
        self._steps = MappedLog(self.path / STEPS_FILE)
        self._events = MappedLog(self.path / EVENTS_FILE)
        self.write_meta()

    def write_meta(self) -> None:
        _atomic_write_json(self.path / META_FILE, self.meta.to_json())

    def write_step(self, step: Step) -> None:
        self._steps.append(_LINE_ENCODER.encode(step.to_json()) + "\n")

    def write_event(self, event: Event) -> None:
        self._events.append(_LINE_ENCODER.encode(event.to_json()) + "\n")

    def finish(self, status: str, error: str | None = None) -> None:
        """Close the files and record how the run ended."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        for fh in (self._steps, self._events):
            if not fh.closed:
                fh.close()
        self.meta.status = status
        self.meta.error = error
        self.meta.ended_at = now_iso()
        self.write_meta()


# --------------------------------------------------------------------------- reading


def _read_jsonl(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)``; a bad last line is a warning, a bad middle line an error."""
    if not path.exists():
        return
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise RunDirError(f"cannot read {path}: {err.strerror}") from None
    raw = raw.rstrip(b"\x00")  # a file still being written (or killed) is NUL-padded
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for number, line in enumerate(lines[: last + 1], start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            if number - 1 == last and not complete_end:
                warnings.append(
                    f"{path.name}: line {number} was cut off mid-write (the run was killed); "
                    "it was skipped"
                )
                return
            raise RunDirError(
                f"{path} line {number} is not a valid JSON object: the run file is corrupt"
            ) from None
        yield number, obj


def load_run(path: str | os.PathLike[str]) -> Run:
    """Load the run at ``path``; see the module docstring for what is tolerated."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path} is not a directory (expected a lazyscope run directory)")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise RunDirError(f"{path} is not a lazyscope run: it has no {META_FILE}")
    try:
        meta_raw = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta_raw, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError, OSError):
        raise RunDirError(f"{meta_path} is not valid JSON: the run file is corrupt") from None
    version = meta_raw.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RunDirError(
            f"{path} was written with run schema {version}, newer than this lazyscope "
            f"understands ({SCHEMA_VERSION}); upgrade lazyscope to read it"
        )
    try:
        meta = Meta.from_json(meta_raw)
    except TypeError as err:
        raise RunDirError(f"{meta_path} has unexpected content: {err}") from None

    warnings: list[str] = []
    steps: list[Step] = []
    tail: Step | None = None
    for number, obj in _read_jsonl(path / STEPS_FILE, warnings):
        try:
            step = Step.from_json(obj)
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(
                f"{path / STEPS_FILE} line {number} is not a valid step ({err}): "
                "the run file is corrupt"
            ) from None
        if step.kind == "tail":
            tail = step
        else:
            steps.append(step)
    steps.sort(key=lambda s: s.index)

    events: list[Event] = []
    for number, obj in _read_jsonl(path / EVENTS_FILE, warnings):
        try:
            events.append(Event.from_json(obj))
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(
                f"{path / EVENTS_FILE} line {number} is not a valid event ({err}): "
                "the run file is corrupt"
            ) from None
    return Run(path=path, meta=meta, steps=steps, events=events, tail=tail, warnings=warnings)


def iter_runs(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Run]:
    """Load several runs in order."""
    for p in paths:
        yield load_run(p)
