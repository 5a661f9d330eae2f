"""Writing a run directory as the run happens: atomic text and JSON writes (never over what is
not a regular file), the append-only logs, and :class:`RunWriter` (records appended, stacks and
payloads interned).

Writing errors: a full disk or an unwritable file raises :class:`~lazyscope.core.errors.OutputError`
(exit 3) naming the file; what was written before stays readable.

The traced program shares the process, and this module survives what it may do meanwhile:

* files are created relative to a descriptor of the run directory opened when the run began
  (:class:`~lazyscope.store.rundir.RunDir`), so ``os.chdir()`` (or a rename of the directory)
  does not move where the rest of the run goes;
* files get the permission bits of the umask lazyscope started with (``os.fchmod``), not of
  one the program set later (``os.umask(0o777)`` would make ``meta.json`` unreadable);
* descriptors are kept above the low numbers programs reuse and checked (an offset mark, else
  device and inode) before each write: a program that closes every descriptor (a daemon's
  ``os.closerange(3, ...)``) and opens its own files never has one of them written or
  truncated by lazyscope;
* no run file is memory-mapped: a file another process truncates while the program runs can
  cost the records it held, never the program (a mapping would kill it with SIGBUS);
* in a forked child (``os.fork()``, a ``DataLoader`` worker) the writer is its parent's: the
  child never writes, truncates or finalises it (:meth:`RunWriter.forget`).
"""

from __future__ import annotations

import errno
import json
import os
import random
import stat
import weakref
from pathlib import Path
from typing import Any

from lazyscope.core.errors import OutputError, show_path
from lazyscope.model import KIND_CODE, STATUSES, STEP_FIELDS, Frame, Meta, Stack, now_iso
from lazyscope.model.codec import encode
from lazyscope.store.layout import ANNOTATIONS_FILE, EVENTS_FILE, INTERN_FILE, META_FILE, STEPS_FILE
from lazyscope.store.records import (
    EVENT_DTYPE,
    EVENT_RECORD,
    KIND_STEP,
    KIND_TAIL,
    NAN,
    STEP_DTYPE,
    STEP_RECORD,
)
from lazyscope.store.rundir import RunDir, high_fd


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: the umask when lazyscope was imported (before any program it traces could change it)
UMASK = _umask()
FILE_MODE = 0o666 & ~UMASK
DIR_MODE = 0o777 & ~UMASK


def is_no_space(err: BaseException) -> bool:
    """True for an OSError that means the disk (or quota) is full."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def _create(name: str | os.PathLike[str], flags: int, dir_fd: int | None) -> int:
    """Open ``name`` (created with lazyscope's own file mode whatever the umask is now)."""
    fd = os.open(name, flags | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        pass
    return fd


# --------------------------------------------------------------------------- writing


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def check_replaceable(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
    """Refuse to replace what is not a regular file: a device (``/dev/full``), a FIFO, a socket,
    a directory, a symbolic link (``/dev/stdout``'s, or one to a file of the user's): an
    atomic write would turn it into a regular file, and a device node replaced by root is a
    broken machine. OutputError (exit 3) naming what is there; nothing is touched."""
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError:
        return  # the write itself says what is wrong
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    if stat.S_ISLNK(st.st_mode):
        try:
            kind += f" (to {show_path(os.readlink(path, dir_fd=dir_fd))})"
        except OSError:
            pass
    raise OutputError(f"{show_path(path)} is {kind}: lazyscope writes a new file or replaces a "
                      "regular one, never anything else; give another path")


def atomic_write_text(path: Path, text: str, *, reserve: int = 0,
                      dir_fd: int | None = None) -> None:
    """Replace ``path`` with ``text``, atomically (a reader sees the old or the new file; a
    failed write leaves no temporary file behind). Text that is not valid UTF-8 (a file name's
    lone surrogates) is written escaped, never an exception.

    ``reserve``: pad the file with spaces to that many bytes. ``dir_fd``: ``path`` is a name
    in that directory."""
    path = Path(path)
    check_replaceable(path, dir_fd=dir_fd)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8", "backslashreplace")
    if reserve > len(data):
        data += b" " * (reserve - len(data))
    try:
        fd = _create(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def atomic_write_json(path: Path, data: dict[str, Any], *, reserve: int = 0,
                      dir_fd: int | None = None) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically; ``reserve`` pads it with spaces
    (JSON ignores them), so that a later :func:`overwrite_json` has its blocks allocated."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n",
                      reserve=reserve, dir_fd=dir_fd)


def overwrite_json(path: Path, data: dict[str, Any], *, dir_fd: int | None = None) -> None:
    """Write ``data`` over ``path`` in place, padded with spaces to the file's size: needs no
    new disk blocks when it fits (the way to record a run's end on a full disk)."""
    text = (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode(
        "utf-8", "backslashreplace")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        size = os.fstat(fd).st_size
        if len(text) > size:
            raise OSError(errno.ENOSPC, "no room to rewrite it in place", str(path))
        os.pwrite(fd, text + b" " * (size - len(text)), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


class AppendLog:
    """An append-only file written with ``pwrite`` at lazyscope's own position.

    A record is in the page cache the moment ``append`` returns, so another process reading
    the file sees it and a SIGKILL loses none of it (the kernel writes the dirty pages back;
    only a machine crash could lose them, as with any un-fsynced write). One system call per
    record (about 1-2 us here), never a buffered ``write`` + ``flush``.

    The file is never memory-mapped: a mapping of a file that another process truncates (a
    ``truncate``, a tool cleaning a full disk) kills the traced program with SIGBUS at its
    next record; a ``pwrite`` past the end of a truncated file only leaves a hole of zeros
    (the reader stops there, said in a warning). A full disk is an ``OSError`` (ENOSPC) at the
    record that did not fit, and what was written before stays.

    The descriptor is checked before each write: lazyscope moves its file offset to a random
    mark nobody else's file has (``pwrite`` never moves it), and a descriptor whose offset is
    not the mark was closed by the program and its number reused: the file is then reopened by
    name in its directory (device and inode checked), never the program's file written.
    """

    def __init__(self, path: Path, *, dir_fd: int | None = None):
        self.path = Path(path)
        self._dir_fd = dir_fd
        fd = high_fd(_create(self.path if dir_fd is None else self.path.name,
                             os.O_RDWR | os.O_CREAT, dir_fd))
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino)
        self._pos = st.st_size
        #: the offset lazyscope's descriptor is parked at (its fingerprint): between 2^36 and
        #: 2^37, below every file system's largest offset, above any run file's size
        self._mark = (1 << 36) + random.getrandbits(35)
        self._fd = self._park(fd)
        self.forgotten = False

    def _park(self, fd: int) -> int:
        try:
            os.lseek(fd, self._mark, os.SEEK_SET)
        except OSError:
            self._mark = -1  # a file that cannot seek there: checked by device and inode
        return fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def size(self) -> int:
        """Bytes appended so far."""
        return self._pos

    def _own_fd(self) -> int:
        """The file's descriptor, reopened by name if the program closed (or reused) it."""
        try:
            if self._mark >= 0:
                if os.lseek(self._fd, 0, os.SEEK_CUR) == self._mark:
                    return self._fd
            else:
                st = os.fstat(self._fd)
                if (st.st_dev, st.st_ino) == self._ident:
                    return self._fd
        except OSError:
            pass
        name: str | Path = self.path
        dir_fd = None
        if self._dir_fd is not None:
            try:
                os.fstat(self._dir_fd)
                name, dir_fd = self.path.name, self._dir_fd
            except OSError:
                pass
        fd = os.open(name, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._ident:
            os.close(fd)
            raise OSError(errno.EBADF, "lazyscope's file was closed or replaced by the program",
                          str(self.path))
        self._fd = self._park(high_fd(fd))
        return self._fd

    def append(self, data: bytes) -> None:
        if self.forgotten:
            return
        fd = self._own_fd()
        view = memoryview(data)
        while view:  # pwrite keeps no file offset: the position is ours
            n = os.pwrite(fd, view, self._pos)
            self._pos += n
            view = view[n:]

    def close(self) -> None:
        if self._fd < 0:
            return
        if self.forgotten:
            self._fd = -1
            return
        try:
            fd = self._own_fd()
        except OSError:
            self._fd = -1
            return
        self._fd = -1
        try:
            os.ftruncate(fd, self._pos)  # a file that was longer before this run appended
        finally:
            os.close(fd)

    def forget(self) -> None:
        """A forked child: never write, truncate or close the parent's file (its descriptor
        goes with the child)."""
        self.forgotten = True

    def zeroed(self, record: int) -> bytes | None:
        """The file's bytes when another process truncated it while it was written (a hole of
        zeros, or a zeroed first record, below what was appended since), else None. Cheap for
        a file nobody touched: a seek for holes and one byte read."""
        if self.forgotten or self._fd < 0 or self._pos < record:
            return None
        fd = self._own_fd()
        try:
            sparse = os.lseek(fd, 0, os.SEEK_HOLE) < self._pos
        except (OSError, AttributeError):
            sparse = False
        self._park(fd)  # SEEK_HOLE moved the offset that tells this descriptor is ours
        if not sparse and os.pread(fd, 1, 0) != b"\0":
            return None
        data = os.pread(fd, self._pos, 0)
        return data if len(data) == self._pos else None

    def rewrite(self, data: bytes) -> None:
        """Replace the file's content (a repair at the end of the run)."""
        fd = self._own_fd()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        self._pos = len(data)


#: the name of :class:`AppendLog` while its files were memory-mapped
MappedLog = AppendLog


#: the encoder of intern and annotation lines (json.dumps(..., default=str) would build a new
#: encoder per call: this runs at step barriers)
_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))


class RunWriter:
    """Writes a run directory as it happens. Steps and events are appended as records; stacks,
    payloads and keys are interned (each distinct value written once)."""

    def __init__(self, path: Path, meta: Meta, *, run_dir: RunDir | None = None):
        """``run_dir``: the directory made (and locked) for this run by
        :func:`~lazyscope.store.prepare_run_dir`; without it ``path`` is created if need be
        (tests, tools that write runs)."""
        self.path = Path(os.path.abspath(path))
        self.meta = meta
        if not meta.started_at:
            meta.started_at = now_iso()
        self._logs: list[AppendLog] = []
        self._ids: dict[Any, int] = {}
        self._n_intern = 0
        self._extra: dict[str, AppendLog] = {}
        self.owner_pid = os.getpid()
        self.forgotten = False
        self.finished = False
        _WRITERS.add(self)
        try:
            if run_dir is None:
                self.path.mkdir(parents=True, exist_ok=True)
                run_dir = RunDir.open(self.path)
            self.run_dir = run_dir
            self.write_meta()
            self._steps = self._open(STEPS_FILE)
            self._events = self._open(EVENTS_FILE)
            self._intern = self._open(INTERN_FILE)
            self._annotations: AppendLog | None = None
        except OSError as err:
            self._close_logs()
            raise OutputError.from_os(err, self.path) from None
        self.steps_written = 0

    def _dir_fd(self) -> int | None:
        """The run directory's descriptor (None, to go by path, if the program closed it)."""
        return self.run_dir.valid_fd()

    def _open(self, name: str) -> AppendLog:
        fd = self._dir_fd()
        log = AppendLog(self.path / name, dir_fd=fd)
        self._logs.append(log)
        return log

    def append_text(self, name: str, text: str) -> None:
        """Append ``text`` to the run's file ``name`` (opened on first use)."""
        if self.forgotten:
            return
        log = self._extra.get(name)
        if log is None:
            log = self._extra[name] = self._open(name)
        try:
            log.append(text.encode("utf-8", "backslashreplace"))
        except OSError as err:
            raise OutputError.from_os(err, self.path, steps=self.steps_written) from None

    def io_path(self) -> Path:
        """A path to the run directory for code that takes paths: it reaches the directory
        even after the program changed its working directory or the directory was renamed."""
        return self.run_dir.io_path()

    def write_text(self, name: str, text: str) -> None:
        """Write (replace) a text file of the run (``error.txt``); OSError as raised."""
        fd = self._dir_fd()
        atomic_write_text(Path(name) if fd is not None else self.path / name, text, dir_fd=fd)

    def forget(self) -> None:
        """In a forked child: this writer is the parent's; drop it without writing, truncating
        or unlocking anything."""
        self.forgotten = True
        for log in self._logs:
            log.forget()
        self.run_dir.forget()

    #: meta.json is kept this large while the run is written, so that its end can be recorded
    #: in place on a disk that filled up meanwhile
    META_RESERVE = 32 << 10

    def write_meta(self, *, final: bool = False) -> None:
        """Write ``meta.json`` (atomically; in place into its reserved space when the disk is
        full)."""
        if self.forgotten:
            return
        fd = self._dir_fd()
        path = Path(META_FILE) if fd is not None else self.path / META_FILE
        data = encode(self.meta)
        try:
            atomic_write_json(path, data, reserve=0 if final else self.META_RESERVE, dir_fd=fd)
        except OSError as err:
            if not is_no_space(err):
                raise
            try:
                overwrite_json(path, data, dir_fd=fd)
            except FileNotFoundError:
                raise err from None

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

    def _repair_truncated(self) -> None:
        """A record file another process truncated while the program ran keeps what was
        appended after, behind zeros: the steps lost become steps of their own index with
        nothing measured (later steps keep their numbers), the events lost are dropped, and
        the run's notes say so (the reader would otherwise refuse the file as corrupt)."""
        import numpy as np

        said = []
        for log, dtype, name in ((self._steps, STEP_DTYPE, STEPS_FILE),
                                 (self._events, EVENT_DTYPE, EVENTS_FILE)):
            data = log.zeroed(dtype.itemsize)
            if data is None:
                continue
            records = np.frombuffer(data[:len(data) // dtype.itemsize * dtype.itemsize],
                                    dtype=dtype).copy()
            lost = records["kind"] == 0
            if not lost.any():
                continue
            if name == STEPS_FILE:
                blank = np.frombuffer(STEP_RECORD.pack(KIND_STEP, 0, *[NAN] * len(STEP_FIELDS)),
                                      dtype=dtype)[0]
                for i in np.flatnonzero(lost):
                    records[i] = blank
                    records[i]["index"] = float(i)
                kept = records
                said.append(f"{STEPS_FILE} was truncated by another process while the program "
                            f"ran: {int(lost.sum())} of its {len(records)} steps lost (nothing "
                            "measured for them)")
            else:
                kept = records[~lost]
                said.append(f"{EVENTS_FILE} was truncated by another process while the program "
                            f"ran: {int(lost.sum())} of its {len(records)} events lost")
            log.rewrite(kept.tobytes())
        if said:
            notes = list(self.meta.info.get("notes") or [])
            self.meta.info["notes"] = notes + [n for n in said if n not in notes]

    def _close_logs(self) -> None:
        for log in self._logs:
            try:
                log.close()
            except OSError:
                pass

    def where(self) -> Path | None:
        """Where the run directory is now: its path, a new path if it was renamed during the
        run, None if it was removed."""
        return self.run_dir.where()

    def finish(self, status: str, error: str | None = None) -> None:
        """Close the files and record how the run ended; release the directory's lock. A
        no-op in a forked child (the run is its parent's) and when already finished."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        if self.forgotten or self.finished or os.getpid() != self.owner_pid:
            return
        self.finished = True
        try:
            self._repair_truncated()
        except Exception:  # noqa: BLE001, S110 - the run's end matters more than the repair
            pass
        self._close_logs()
        self.meta.status = status
        self.meta.error = error
        self.meta.ended_at = now_iso()
        try:
            where = self.where()
            if where is None:
                raise OutputError(
                    f"the run directory {show_path(self.path)} was removed while the run was "
                    "written: nothing of it could be kept")
            self.write_meta(final=True)
        except OSError as err:
            raise OutputError.from_os(err, self.path, steps=self.steps_written) from None
        finally:
            self.run_dir.close()


#: every writer of this process: a forked child forgets them (they are its parent's)
_WRITERS: weakref.WeakSet[RunWriter] = weakref.WeakSet()


def _forget_in_child() -> None:
    for writer in list(_WRITERS):
        try:
            writer.forget()
        except Exception:  # noqa: BLE001, S110 - a child must never fail for this
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
