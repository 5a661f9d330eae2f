"""The run directory on disk: writing it as a run happens, reading it back (schemas 1 and 2).

Schema 2 (written by this lazyscope)::

    meta.json          what ran, where, versions, capabilities, status (replaced atomically)
    steps.bin          one fixed 120-byte record per step: a tag byte (1 step, 2 tail) and 7
                       reserved, then 14 little-endian float64: the index and
                       model.STEP_FIELDS (NaN = not measured)
    events.bin         one fixed 40-byte record per event: kind code (u8), stack id (u32),
                       step (i64), seconds (f64), payload id (u32), key id (u32), value (f64)
    intern.jsonl       line N holds the value of id N, once: a frame {"f": [file, line,
                       function, library]}, a stack {"s": [frame ids, innermost first]}, a
                       payload {"p": {...}} or a string (a graph id)
    annotations.jsonl  {"step": i, ...} for steps the program annotated (tokens, shapes ...)

Why binary records: a million steps as JSON lines took 14 s to parse on a 2-core VM; as records
they load in 0.1 s (``benchmarks/scale.py``). Stacks and payloads repeat (the same ``.item()``
every step), so each distinct one is written once.

Every file is appended through a shared memory map (:class:`MappedLog`): a record is in the page
cache, safe from a kill, the moment it is copied, with no system call per step. Until the writer
closes a file it is padded with zero bytes, which the reader ignores. A run killed mid-way loads
with every finished record; a half-written last record or line is dropped with a warning.

Schema 1 (``steps.jsonl``, ``events.jsonl``) is read and converted into the same model.

Writing errors: a full disk or an unwritable file raises :class:`~lazyscope.errors.OutputError`
(exit 3) naming the file; what was written before stays readable.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from lazyscope.errors import OutputError, RunDirError
from lazyscope.model import (
    EVENT_KINDS,
    KIND_CODE,
    PAYLOADS,
    SCHEMA_VERSION,
    STATUSES,
    STEP_FIELDS,
    Capabilities,
    Compile,
    EventTable,
    Frame,
    GraphBreak,
    GraphInput,
    Interned,
    Meta,
    Run,
    Stack,
    StepTable,
    Sync,
    now_iso,
)

META_FILE = "meta.json"
STEPS_FILE = "steps.bin"
EVENTS_FILE = "events.bin"
INTERN_FILE = "intern.jsonl"
ANNOTATIONS_FILE = "annotations.jsonl"
V1_STEPS_FILE = "steps.jsonl"
V1_EVENTS_FILE = "events.jsonl"

STEP_RECORD = struct.Struct("<B7x" + "d" * (1 + len(STEP_FIELDS)))
STEP_DTYPE = np.dtype([("kind", "u1"), ("_reserved", "V7"), ("index", "<f8")]
                      + [(f, "<f8") for f in STEP_FIELDS])
EVENT_RECORD = struct.Struct("<B3xIqdIId")
EVENT_DTYPE = np.dtype({
    "names": ["kind", "stack", "step", "seconds", "payload", "key", "value"],
    "formats": ["u1", "<u4", "<i8", "<f8", "<u4", "<u4", "<f8"],
    "offsets": [0, 4, 8, 16, 24, 28, 32],
    "itemsize": 40,
})
assert STEP_RECORD.size == STEP_DTYPE.itemsize and EVENT_RECORD.size == EVENT_DTYPE.itemsize
#: every record starts with a non-zero byte, so a record cut anywhere is told from padding
KIND_STEP, KIND_TAIL = 1, 2
NAN = float("nan")


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


# --------------------------------------------------------------------------- the run dir


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a lazyscope run: its ``meta.json`` is a JSON object written by
    lazyscope (a ``schema_version`` and a ``backend``), or it holds ``rank<N>/`` runs only
    (a multi-process run's directory before its own meta is written). A file that merely has
    the name is not enough: ``--force`` deletes what this accepts."""
    path = Path(path)
    try:
        meta = path / META_FILE
        if not meta.is_file():
            return False
        raw = json.loads(meta.read_bytes()[:1 << 22].decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return (isinstance(raw, dict) and isinstance(raw.get("schema_version"), int)
            and isinstance(raw.get("backend"), str))


def _contains_cwd(path: Path) -> bool:
    try:
        cwd = Path.cwd().resolve()
        target = path.resolve()
    except (OSError, RuntimeError):  # Python < 3.13 raises RuntimeError on a symlink loop
        return False
    return cwd == target or target in cwd.parents


def _unwritable(path: Path) -> OSError | None:
    """Why the tree at ``path`` cannot be removed (a read-only mount, a directory in it the
    process may not change), or None."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return OSError(errno.EACCES, os.strerror(errno.EACCES), str(path.parent))
        for root, _dirs, _files in os.walk(path):
            if not os.access(root, os.W_OK | os.X_OK):
                return OSError(errno.EACCES, os.strerror(errno.EACCES), root)
    except OSError as err:
        return err
    return None


def check_run_dir(path: Path, force: bool) -> bool:
    """Refuse ``path`` as a run directory (RunDirError / OutputError, exit 3) for every reason
    that can be known without changing anything; True when an old run there will be replaced.

    Cheap and side-effect free, so a trace calls it before importing its backend (seconds for
    torch_xla): a mistyped ``--out`` is refused at once. :func:`prepare_run_dir` calls it again.
    """
    path = Path(path)
    if str(path) in ("", "."):
        raise RunDirError("the output directory must be a new directory, not the current one")
    if path.is_symlink():
        target = os.readlink(path)
        raise RunDirError(f"{path} is a symbolic link (to {target}); give the real directory "
                          "or a new path")
    for parent in path.parents:
        if parent.is_symlink() and not parent.exists():
            try:
                os.stat(parent)
            except OSError as err:
                if err.errno == errno.ELOOP:  # a loop, not a dangling link
                    raise OutputError.from_os(OSError(err.errno, err.strerror, str(path)),
                                              path) from None
            raise OutputError(f"cannot write {path}: {parent} is a symbolic link to "
                              f"{os.readlink(parent)}, which does not exist")
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path} exists and is not a directory")
    try:
        if path.is_dir() and any(path.iterdir()):
            if not force:
                raise RunDirError(f"{path} already exists; pass --force to replace it")
            if not is_run_dir(path) and not rank_dirs(path):
                raise RunDirError(
                    f"{path} is not empty and is not a lazyscope run; refusing to replace it")
            if _contains_cwd(path):
                raise RunDirError(f"{path} holds the current directory; refusing to replace it")
            why = _unwritable(path)
            if why is not None:
                raise OutputError.from_os(why, path, replacing=True)
            return True
        why = _uncreatable(path)
        if why is not None:
            raise why
    except OSError as err:
        raise OutputError.from_os(err, path) from None
    return False


def _uncreatable(path: Path) -> OSError | None:
    """Why a new (or empty) directory at ``path`` cannot be made and written: the nearest
    existing directory is on a read-only mount, or this process may not write it; or None."""
    here = path if path.is_dir() else next((p for p in path.parents if p.exists()), Path("."))
    if not here.is_dir():
        return OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    if os.statvfs(here).f_flag & os.ST_RDONLY:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    if not os.access(here, os.W_OK | os.X_OK):
        # name what mkdir -p would fail on: the first directory to make below ``here``
        first = path
        while first != here and first.parent != here and first.parent != first:
            first = first.parent
        return OSError(errno.EACCES, os.strerror(errno.EACCES), str(first))
    return None


def prepare_run_dir(path: Path, force: bool) -> None:
    """Make ``path`` an empty directory for a new run, or refuse with a RunDirError /
    OutputError (exit 3) that says why.

    An existing non-empty directory is refused without ``force``; with ``force`` it is replaced
    only if it is a lazyscope run (never an arbitrary directory, never the current directory or
    one holding it), and only when the whole old run can be removed: it is first moved aside,
    the new directory created, and only then the old one deleted, so a failure at any point
    leaves the old run as it was. A symbolic link as ``path`` is refused (replacing what it
    points to is never what was meant).
    """
    path = Path(path)
    replacing = check_run_dir(path, force)
    old: Path | None = None
    try:
        if replacing:
            old = path.with_name(f".{path.name}.lazyscope-old-{os.getpid()}")
            os.rename(path, old)
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".lazyscope-write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            if old is not None:
                shutil.rmtree(path, ignore_errors=True)
                os.rename(old, path)
                old = None
            if err.filename and str(err.filename).endswith(".lazyscope-write-test"):
                err.filename = str(path)
            raise err
    except OSError as err:
        raise OutputError.from_os(err, path) from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- reading


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RunDirError(f"cannot read {path}: {err.strerror}") from None


#: records read per chunk: about half a megabyte, so a chunk is still in cache when its fields
#: are copied out
_CHUNK_RECORDS = 4096


def _records(path: Path, dtype: np.dtype, warnings: list[str],
             first: str) -> dict[str, np.ndarray]:
    """The records of a binary file as columns (one contiguous array per field): zero padding
    at the end ignored, a partial last record dropped with a warning, a zero record in the
    middle is corruption.

    The file is read in chunks into one reused buffer and each chunk's fields copied out to
    their columns: a million-step file is never held as one bytes object and then copied
    field by field out of it (three times slower here, most of it page faults)."""
    names = [n for n in dtype.names if not n.startswith("_")]
    size = dtype.itemsize
    try:
        fh = open(path, "rb", buffering=0)
    except FileNotFoundError:
        return {n: np.zeros(0, dtype=dtype[n].newbyteorder("=")) for n in names}
    except OSError as err:
        raise RunDirError(f"cannot read {path}: {err.strerror}") from None
    with fh:
        try:
            whole = os.fstat(fh.fileno()).st_size // size
            cols = {n: np.empty(whole, dtype=dtype[n].newbyteorder("=")) for n in names}
            buf = np.empty(min(_CHUNK_RECORDS, max(whole, 1)), dtype=dtype)
            view = memoryview(buf).cast("B")
            pos = 0
            while pos < whole:
                want = min(len(buf), whole - pos)
                got = 0
                while got < want * size:  # a short read is not the end unless it reads 0
                    k = fh.readinto(view[got:want * size])
                    if not k:
                        break
                    got += k
                got //= size
                chunk = buf[:got]
                for n in names:
                    cols[n][pos:pos + got] = chunk[n]
                pos += got
                if got < want:  # the file was cut while read (a run being closed)
                    break
            after = fh.read(1) if pos == whole else b""
        except OSError as err:
            raise RunDirError(f"cannot read {path}: {err.strerror}") from None
    valid = cols[first][:pos] != 0
    n = int(np.count_nonzero(valid))
    if n and not valid[:n].all():
        raise RunDirError(f"{path} has an empty record in the middle: the run file is corrupt")
    # what follows the whole records is zero padding (a run still being written, or killed),
    # unless it starts with a record's non-zero tag byte: a cut record
    if n == pos and after not in (b"", b"\x00"):
        warnings.append(f"{path.name}: the last record was cut off mid-write (the run was "
                        "killed); it was skipped")
    return {name: col[:n] for name, col in cols.items()}


def _lines(path: Path, warnings: list[str]) -> list[bytes]:
    """Complete lines of a text file (zero padding ignored; a cut last line is a warning)."""
    raw = _read_bytes(path)
    if not raw:
        return []
    raw = raw.rstrip(b"\x00")
    if not raw:
        return []
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    elif lines:
        warnings.append(f"{path.name}: its last line was cut off mid-write (the run was "
                        "killed); it was skipped")
        lines.pop()
    return lines


def _decode_frame(obj: Any) -> Frame:
    f = obj["f"]
    return Frame(str(f[0]), int(f[1]), str(f[2]), bool(f[3]) if len(f) > 3 else False)


class _InternTable:
    """The intern file, decoded lazily: each line once, when first used."""

    def __init__(self, path: Path, lines: list[bytes]):
        self.path = path
        self.lines = lines
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def get(self, i: int) -> Any:
        try:
            return self._cache[i]
        except KeyError:
            pass
        try:
            value = json.loads(self.lines[i - 1].decode("utf-8"))
            if isinstance(value, dict) and "f" in value:
                value = _decode_frame(value)
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, IndexError):
            raise RunDirError(f"{self.path} line {i} is not a valid entry: the run file is "
                              "corrupt") from None
        self._cache[i] = value
        return value

    def stack(self, ref: int) -> Stack:
        obj = self.get(ref)
        try:
            frames = tuple(self.get(int(i)) for i in obj["s"])
        except (TypeError, KeyError, ValueError):
            raise RunDirError(f"{self.path} line {ref} is not a stack: the run file is "
                              "corrupt") from None
        if not all(isinstance(f, Frame) for f in frames):
            raise RunDirError(f"{self.path} line {ref}: a stack refers to a non-frame entry: "
                              "the run file is corrupt")
        return frames

    def payload(self, ref: int, kind_of: dict[int, str]) -> Any:
        obj = self.get(ref)
        kind = kind_of.get(ref)
        try:
            return PAYLOADS[kind].from_json(obj["p"]) if kind else obj["p"]
        except (TypeError, KeyError, ValueError, AttributeError):
            raise RunDirError(f"{self.path} line {ref} is not a valid {kind} payload: the run "
                              "file is corrupt") from None

    def string(self, ref: int) -> str:
        value = self.get(ref)
        if not isinstance(value, str):
            raise RunDirError(f"{self.path} line {ref} is not a string: the run file is corrupt")
        return value


def _meta(path: Path) -> tuple[Meta, int]:
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
            f"understands ({SCHEMA_VERSION}); upgrade lazyscope to read it")
    if version < 2:
        meta_raw.pop("capabilities", None)
        if meta_raw.get("warmup_steps") == 2:  # schema 1 always wrote its fixed warm-up
            meta_raw["warmup_steps"] = None
    try:
        meta = Meta.from_json(meta_raw)
    except TypeError as err:
        raise RunDirError(f"{meta_path} has unexpected content: {err}") from None
    return meta, version


def load_run(path: str | os.PathLike[str]) -> Run:
    """Load the run at ``path``; see the module docstring for what is tolerated."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path} is not a directory (expected a lazyscope run directory)")
    meta, version = _meta(path)
    if version < 2:
        return _load_v1(path, meta)
    warnings: list[str] = []
    steps_cols = _records(path / STEPS_FILE, STEP_DTYPE, warnings, "kind")
    cols = _records(path / EVENTS_FILE, EVENT_DTYPE, warnings, "kind")
    intern = _InternTable(path / INTERN_FILE, _lines(path / INTERN_FILE, warnings))
    annotations = _annotations(path / ANNOTATIONS_FILE, warnings)

    kinds = steps_cols["kind"]
    if len(kinds) and not np.isin(kinds, (KIND_STEP, KIND_TAIL)).all():
        raise RunDirError(f"{path / STEPS_FILE} has a record of unknown kind: the run file is "
                          "corrupt")
    if len(kinds) and kinds[-1] == KIND_TAIL and not (kinds[:-1] == KIND_TAIL).any():
        # the usual shape: views, no copy
        columns = {f: steps_cols[f][:-1] for f in STEP_FIELDS}
        tail_rows = {f: steps_cols[f][-1:] for f in STEP_FIELDS}
    else:
        is_step = kinds == KIND_STEP
        columns = {f: steps_cols[f][is_step] for f in STEP_FIELDS}
        tail_rows = {f: steps_cols[f][~is_step] for f in STEP_FIELDS}
    bad = 0
    for f in meta.capabilities.step_fields:
        finite = np.isfinite(columns[f])
        if not finite.all():
            bad += int((~finite).sum())
            columns[f] = np.where(finite, columns[f], 0.0)
    if bad:
        warnings.append(f"{STEPS_FILE}: {bad} measured value(s) were not numbers (the file is "
                        "damaged); they count as 0")
    tail = ({f: float(tail_rows[f][-1]) for f in STEP_FIELDS} if len(tail_rows["wall_s"])
            else None)
    steps = StepTable(columns, meta.capabilities.step_fields, tail, annotations)

    codes = cols["kind"]
    if len(codes) and int(codes.max()) > len(EVENT_KINDS):
        raise RunDirError(f"{path} has events of a kind this lazyscope does not know; upgrade "
                          "lazyscope to read it")
    refs = [cols[c] for c in ("stack", "payload", "key")]
    if len(codes) and max(int(r.max()) for r in refs) > len(intern):
        missing = max(int(r.max()) for r in refs)
        if missing == len(intern) + 1 and warnings:
            # the intern line was cut by a kill: drop the events that need it
            keep = np.all([r <= len(intern) for r in refs], axis=0)
            cols = {c: col[keep] for c, col in cols.items()}
        else:
            raise RunDirError(f"{path / EVENTS_FILE} refers to entry {missing} of "
                              f"{INTERN_FILE}, which has {len(intern)}: the run file is corrupt")
    # the kind of each payload id, by scatter (ids are intern line numbers: a small range),
    # not a sort of the events
    code_of = np.zeros(len(intern) + 1, dtype=np.uint8)
    code_of[cols["payload"]] = cols["kind"]
    kind_of = {int(pid): EVENT_KINDS[int(code_of[pid]) - 1]
               for pid in np.flatnonzero(code_of) if pid}
    events = EventTable(cols, _LazyRef(intern.stack),
                        _LazyRef(lambda i: intern.payload(i, kind_of)), _LazyRef(intern.string))
    return Run(path=path, meta=meta, steps=steps, events=events, warnings=warnings)


class _LazyRef:
    """``ref[i]``: the value of intern id ``i`` (None for 0), decoded once."""

    def __init__(self, decode: Any):
        self._decode = decode
        self._cache: dict[int, Any] = {}

    def __getitem__(self, i: int) -> Any:
        i = int(i)
        if i == 0:
            return None
        try:
            return self._cache[i]
        except KeyError:
            value = self._cache[i] = self._decode(i)
            return value


def rank_dirs(path: Path) -> dict[int, Path]:
    """``{rank: RUN/rank<N>}`` for the rank subdirectories of a multi-process run."""
    out = {}
    try:
        for p in Path(path).iterdir():
            if p.name.startswith("rank") and p.name[4:].isdigit() and is_run_dir(p):
                out[int(p.name[4:])] = p
    except OSError:
        return {}
    return dict(sorted(out.items()))


def load_target(path: str | os.PathLike[str]) -> Any:
    """A run, or a multi-process run (:class:`~lazyscope.analyze.ranks.RankedRun`) when
    ``path`` holds ``rank<N>/`` runs."""
    path = Path(path)
    ranks = rank_dirs(path) if path.is_dir() else {}
    if not ranks:
        return load_run(path)
    from lazyscope.analyze.ranks import RankedRun

    parent = _meta(path)[0] if is_run_dir(path) else None
    return RankedRun(path=path, parent=parent,
                     ranks={r: load_run(p) for r, p in ranks.items()})


def _annotations(path: Path, warnings: list[str]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(_lines(path, warnings), 1):
        try:
            obj = json.loads(line.decode("utf-8"))
            step = int(obj.pop("step"))
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            raise RunDirError(f"{path} line {number} is not a valid annotation: the run file is "
                              "corrupt") from None
        out.setdefault(step, {}).update(obj)
    return out


# --------------------------------------------------------------------------- schema 1


#: what the schema-1 backends measured (their other fields were written as 0)
V1_MEASURED = {
    "xla": list(STEP_FIELDS),
    "eager": ["wall_s", "t_end_s", "compile_count", "compile_s"],
    "compile": ["wall_s", "t_end_s", "compile_count", "compile_s"],
}


def _v1_jsonl(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    raw = _read_bytes(path)
    if raw is None:
        return
    raw = raw.rstrip(b"\x00")
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
                warnings.append(f"{path.name}: line {number} was cut off mid-write (the run was "
                                "killed); it was skipped")
                return
            raise RunDirError(
                f"{path} line {number} is not a valid JSON object: the run file is corrupt"
            ) from None
        yield number, obj


def _v1_step(obj: dict[str, Any]) -> tuple[str, int, dict[str, float], dict[str, int], dict]:
    def group(name: str) -> dict[str, Any]:
        value = obj.get(name) or {}
        if not isinstance(value, dict):
            raise ValueError(f"'{name}' is not an object")
        return value

    comp, exe = group("compile"), group("execute")
    to_dev, from_dev = group("to_device"), group("from_device")
    fallback = obj.get("fallback_ops") or {}
    extra = obj.get("extra") or {}
    if not isinstance(fallback, dict) or not isinstance(extra, dict):
        raise ValueError("'fallback_ops' and 'extra' must be objects")
    fallbacks = {str(k): int(v) for k, v in fallback.items()}
    values = {
        "wall_s": float(obj.get("wall_s", 0.0)), "t_end_s": float(obj.get("t_end_s", 0.0)),
        "compile_count": int(comp.get("count", 0)), "compile_s": float(comp.get("seconds", 0.0)),
        "execute_count": int(exe.get("count", 0)), "execute_s": float(exe.get("seconds", 0.0)),
        "to_device_count": int(to_dev.get("count", 0)),
        "to_device_bytes": int(to_dev.get("bytes", 0)),
        "to_device_s": float(to_dev.get("seconds", 0.0)),
        "from_device_count": int(from_dev.get("count", 0)),
        "from_device_bytes": int(from_dev.get("bytes", 0)),
        "from_device_s": float(from_dev.get("seconds", 0.0)),
        "fallback_count": sum(fallbacks.values()),
    }
    return str(obj.get("kind", "step")), int(obj["step"]), values, fallbacks, extra


def _v1_frame(value: Any) -> Frame | None:
    """A schema-1 frame, classified. Schema-1 runs were recorded by other checkouts: a frame of
    lazyscope's own package there (``.../lazyscope/backends/xla.py``) is library code too."""
    from lazyscope.frames import is_library_file

    if not isinstance(value, dict) or "file" not in value:
        return None
    file = str(value["file"])
    norm = file.replace("\\", "/")
    own = "/lazyscope/" in norm and "/lazyscope/scenarios/" not in norm
    return Frame(file, int(value.get("line", 0)), str(value.get("function", "")),
                 own or is_library_file(file))


def _v1_event(obj: dict[str, Any]) -> tuple[str, int, float, Stack, Any, str, float]:
    """A schema-1 event as (kind, step, seconds, stack, payload, key, value)."""
    kind = str(obj["kind"])
    step = int(obj.get("step", -1))
    seconds = float(obj.get("seconds", 0.0))
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError("'data' must be an object")
    frames = [f for f in (_v1_frame(f) for f in obj.get("frames") or []) if f is not None]
    site = _v1_frame(obj.get("site"))
    if site is not None and site not in frames:
        frames.insert(0, Frame(site.file, site.line, site.function, False))
    stack = tuple(frames)
    if kind in ("compile", "compile_backward"):
        inputs = None
        if isinstance(data.get("input_shapes"), list):
            dtypes = data.get("input_dtypes") or []
            inputs = [GraphInput(str(dtypes[i]) if i < len(dtypes) else "", [int(d) for d in s])
                      for i, s in enumerate(data["input_shapes"])]
        payload: Any = Compile(
            phase="backward" if kind == "compile_backward" else
            ("forward" if "compile_id" in data else "graph"),
            cause=str(data.get("cause") or data.get("xla_cause") or ""),
            cause_kind=str(data.get("cause_kind", "")),
            function=str(data.get("frame", "")),
            inputs=inputs,
            num_inputs=data.get("num_inputs"), num_outputs=data.get("num_outputs"),
            ops=data.get("ops"), digest=data.get("ir_digest"), donors=data.get("buffer_donors"),
            hlo_file=data.get("hlo_file"),
        )
        key = str(data.get("graph_hash") or data.get("compile_id") or "")
        return "compile", step, seconds, stack, payload, key, 0.0
    if kind == "sync":
        payload = Sync(read=str(data.get("read", "")), shape=data.get("shape"),
                       message=str(data.get("message", "")))
        return "sync", step, seconds, stack, payload, "", float(data.get("executions", 0) or 0)
    if kind == "fallback":
        from lazyscope.model import Fallback

        return ("fallback", step, seconds, stack, Fallback(op=str(data.get("op", ""))), "",
                float(data.get("calls", 1) or 1))
    if kind == "graph_break":
        return ("graph_break", step, seconds, stack, GraphBreak(reason=str(data.get("reason", ""))),
                "", 0.0)
    raise ValueError(f"unknown event kind {kind!r}")


def _load_v1(path: Path, meta: Meta) -> Run:
    """A schema-1 run (JSON lines), converted into the schema-2 model in memory."""
    from lazyscope.model import FallbackExec

    warnings: list[str] = []
    measured = V1_MEASURED.get(meta.backend, list(STEP_FIELDS))
    meta.capabilities = Capabilities(step_fields=measured)
    rows: list[tuple[int, dict[str, float]]] = []
    tail: dict[str, float] | None = None
    annotations: dict[int, dict[str, Any]] = {}
    events: list[tuple[str, int, float, Stack, Any, str, float]] = []
    for number, obj in _v1_jsonl(path / V1_STEPS_FILE, warnings):
        try:
            kind, index, values, fallbacks, extra = _v1_step(obj)
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(f"{path / V1_STEPS_FILE} line {number} is not a valid step "
                              f"({err}): the run file is corrupt") from None
        if kind == "tail":
            tail = values
        else:
            rows.append((index, values))
        if extra:
            annotations[index] = extra
        for op, n in fallbacks.items():
            events.append(("fallback_exec", index, 0.0, (), FallbackExec(op), "", float(n)))
    rows.sort(key=lambda r: r[0])
    columns = {f: np.array([v[f] for _, v in rows], dtype=np.float64) for f in STEP_FIELDS}
    for number, obj in _v1_jsonl(path / V1_EVENTS_FILE, warnings):
        try:
            events.append(_v1_event(obj))
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(f"{path / V1_EVENTS_FILE} line {number} is not a valid event "
                              f"({err}): the run file is corrupt") from None
    return Run(path=path, meta=meta,
               steps=StepTable(columns, measured, tail, annotations),
               events=table_from_events(events), warnings=warnings)


def table_from_events(events: list[tuple[str, int, float, Stack, Any, str, float]]) -> EventTable:
    """An EventTable built in memory from decoded events (schema 1, tests, merges)."""
    stacks: list[Any] = []
    payloads: list[Any] = []
    keys: list[Any] = []
    ids: dict[Any, int] = {}

    def ref(table: list[Any], tag: str, value: Any, hashable: Any) -> int:
        if value is None or value == () or value == "":
            return 0
        k = (tag, hashable)
        if k not in ids:
            table.append(value)
            ids[k] = len(table)
        return ids[k]

    n = len(events)
    cols = {"kind": np.zeros(n, np.uint8), "step": np.zeros(n, np.int64),
            "seconds": np.zeros(n), "stack": np.zeros(n, np.uint32),
            "payload": np.zeros(n, np.uint32), "key": np.zeros(n, np.uint32),
            "value": np.zeros(n)}
    for i, (kind, step, seconds, stack, payload, key, value) in enumerate(events):
        cols["kind"][i] = KIND_CODE[kind]
        cols["step"][i] = step
        cols["seconds"][i] = seconds
        cols["stack"][i] = ref(stacks, "s", stack, stack)
        cols["payload"][i] = ref(payloads, "p", payload,
                                 json.dumps(payload.to_json(), sort_keys=True, default=str)
                                 if payload is not None else None)
        cols["key"][i] = ref(keys, "k", key, key)
        cols["value"][i] = value
    return EventTable(cols, Interned(stacks), Interned(payloads), Interned(keys))
