"""Writing a run directory as the run happens: atomic text and JSON writes, the memory-mapped
append-only logs, and :class:`RunWriter` (records appended, stacks and payloads interned).

Writing errors: a full disk or an unwritable file raises :class:`~lazyscope.errors.OutputError`
(exit 3) naming the file; what was written before stays readable."""

from __future__ import annotations

import errno
import json
import mmap
import os
from pathlib import Path
from typing import IO, Any

from lazyscope.errors import OutputError
from lazyscope.model import KIND_CODE, STATUSES, STEP_FIELDS, Frame, Meta, Stack, now_iso
from lazyscope.store.records import (
    ANNOTATIONS_FILE,
    EVENT_RECORD,
    EVENTS_FILE,
    INTERN_FILE,
    KIND_STEP,
    KIND_TAIL,
    META_FILE,
    NAN,
    STEP_RECORD,
    STEPS_FILE,
)


def is_no_space(err: BaseException) -> bool:
    """True for an OSError that means the disk (or quota) is full."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


# --------------------------------------------------------------------------- writing


def atomic_write_text(path: Path, text: str, *, reserve: int = 0) -> None:
    """Replace ``path`` with ``text``, atomically (a reader sees the old or the new file; a
    failed write leaves no temporary file behind).

    ``reserve``: pad the file with spaces to that many bytes."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            if reserve > len(text):
                fh.write(" " * (reserve - len(text)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def atomic_write_json(path: Path, data: dict[str, Any], *, reserve: int = 0) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically; ``reserve`` pads it with spaces
    (JSON ignores them), so that a later :func:`overwrite_json` has its blocks allocated."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n",
                      reserve=reserve)


def overwrite_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` over ``path`` in place, padded with spaces to the file's size: needs no
    new disk blocks when it fits (the way to record a run's end on a full disk)."""
    text = (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")
    size = path.stat().st_size
    if len(text) > size:
        raise OSError(errno.ENOSPC, "no room to rewrite it in place", str(path))
    with open(path, "r+b") as fh:
        fh.write(text + b" " * (size - len(text)))
        fh.flush()
        os.fsync(fh.fileno())


class MappedLog:
    """An append-only file written through a shared memory map.

    ``append`` copies bytes into the mapping: no system call, yet they are in the page cache at
    once, so another process reading the file sees them and a SIGKILL loses none of them (the
    kernel writes the dirty pages back; only a machine crash could lose them, as with an
    un-fsynced ``write``). A ``write`` + ``flush`` per step was most of lazyscope's per-step
    overhead on a loaded 2-core VM (``benchmarks/overhead.py``). The mapping grows by doubling;
    blocks are reserved with ``posix_fallocate`` first, so a full disk is an ``OSError`` here
    (then a fallback to plain writes, which raise on a full disk too), never a SIGBUS on a page
    write. ``close`` truncates the zero padding away.
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

    @property
    def size(self) -> int:
        """Bytes appended so far."""
        return self._pos

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

    def append(self, data: bytes) -> None:
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
        fd, self._fd = self._fd, -1
        try:
            if self._map is not None:
                self._map.close()
                self._map = None
            if self._fallback is not None:
                self._fallback.close()
                self._fallback = None
            os.ftruncate(fd, self._pos)
        finally:
            os.close(fd)


#: the encoder of intern and annotation lines (json.dumps(..., default=str) would build a new
#: encoder per call: this runs at step barriers)
_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))


class RunWriter:
    """Writes a run directory as it happens. Steps and events are appended as records; stacks,
    payloads and keys are interned (each distinct value written once)."""

    def __init__(self, path: Path, meta: Meta):
        self.path = Path(path)
        self.meta = meta
        if not meta.started_at:
            meta.started_at = now_iso()
        self._logs: list[MappedLog] = []
        self._ids: dict[Any, int] = {}
        self._n_intern = 0
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.write_meta()
            self._steps = self._open(STEPS_FILE)
            self._events = self._open(EVENTS_FILE)
            self._intern = self._open(INTERN_FILE)
            self._annotations: MappedLog | None = None
        except OSError as err:
            self._close_logs()
            raise OutputError.from_os(err, self.path) from None
        self.steps_written = 0

    def _open(self, name: str) -> MappedLog:
        log = MappedLog(self.path / name)
        self._logs.append(log)
        return log

    #: meta.json is kept this large while the run is written, so that its end can be recorded
    #: in place on a disk that filled up meanwhile
    META_RESERVE = 32 << 10

    def write_meta(self, *, final: bool = False) -> None:
        """Write ``meta.json`` (atomically; in place into its reserved space when the disk is
        full)."""
        path = self.path / META_FILE
        data = self.meta.to_json()
        try:
            atomic_write_json(path, data, reserve=0 if final else self.META_RESERVE)
        except OSError as err:
            if not is_no_space(err) or not path.exists():
                raise
            overwrite_json(path, data)

    # -- interning ----------------------------------------------------------------------
    def _intern_line(self, key: Any, line: str) -> int:
        self._intern.append((line + "\n").encode("utf-8"))
        self._n_intern += 1
        self._ids[key] = self._n_intern
        return self._n_intern

    def frame_id(self, frame: Frame) -> int:
        key = ("f", frame.file, frame.line, frame.function, frame.library)
        found = self._ids.get(key)
        if found is not None:
            return found
        return self._intern_line(key, _ENCODER.encode(
            {"f": [frame.file, frame.line, frame.function, frame.library]}))

    def user_files(self) -> set[str]:
        """The files of the user's code that the recorded events' stacks point at."""
        return {key[1] for key in self._ids if key[0] == "f" and not key[4]}

    def stack_id(self, stack: Stack | None) -> int:
        if not stack:
            return 0
        ids = tuple(self.frame_id(f) for f in stack)
        key = ("s", ids)
        found = self._ids.get(key)
        if found is not None:
            return found
        return self._intern_line(key, _ENCODER.encode({"s": list(ids)}))

    def payload_id(self, payload: Any) -> int:
        if payload is None:
            return 0
        text = _ENCODER.encode({"p": payload.to_json()})
        # keyed by the payload's type too: a Fallback and a FallbackExec of one op have the
        # same JSON, and each event's kind decodes its payload line
        key = ("p", type(payload), text)
        found = self._ids.get(key)
        if found is not None:
            return found
        return self._intern_line(key, text)

    def key_id(self, key: str) -> int:
        if not key:
            return 0
        found = self._ids.get(("k", key))
        if found is not None:
            return found
        return self._intern_line(("k", key), _ENCODER.encode(key))

    # -- records --------------------------------------------------------------------------
    def write_step(self, index: int, values: dict[str, float | None], *, tail: bool = False,
                   annotations: dict[str, Any] | None = None) -> None:
        """Append a step record; fields missing from ``values`` are written as NaN."""
        get = values.get
        record = STEP_RECORD.pack(  # runs at every step barrier: no float() of each field
            KIND_TAIL if tail else KIND_STEP, index,
            *[NAN if (v := get(f)) is None else v for f in STEP_FIELDS])
        try:
            if annotations:
                if self._annotations is None:
                    self._annotations = self._open(ANNOTATIONS_FILE)
                self._annotations.append(
                    (_ENCODER.encode({"step": index, **annotations}) + "\n").encode("utf-8"))
            self._steps.append(record)
        except OSError as err:
            raise OutputError.from_os(err, self.path, steps=self.steps_written) from None
        if not tail:
            self.steps_written += 1

    def write_event(self, kind: str, step: int, *, seconds: float = 0.0,
                    stack: Stack | None = None, payload: Any = None, key: str = "",
                    value: float = 0.0) -> None:
        try:
            record = EVENT_RECORD.pack(KIND_CODE[kind], self.stack_id(stack), int(step),
                                       float(seconds), self.payload_id(payload),
                                       self.key_id(key), float(value))
            self._events.append(record)
        except OSError as err:
            raise OutputError.from_os(err, self.path, steps=self.steps_written) from None

    def _close_logs(self) -> None:
        for log in self._logs:
            try:
                log.close()
            except OSError:
                pass

    def finish(self, status: str, error: str | None = None) -> None:
        """Close the files and record how the run ended."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        self._close_logs()
        self.meta.status = status
        self.meta.error = error
        self.meta.ended_at = now_iso()
        try:
            self.write_meta(final=True)
        except OSError as err:
            raise OutputError.from_os(err, self.path, steps=self.steps_written) from None
