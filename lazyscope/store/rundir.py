"""The run directory as a place: what counts as a lazyscope run, the checks before one is made
or replaced, and the one place that names the rank directories of a multi-process run
(``RUN/rank<N>``).

Ownership: a run directory is created and locked (:mod:`lazyscope.store.lock`) by the trace
that writes it, before anything is written, and stays locked until that trace ends. ``--force``
replaces only

* a run no live trace is writing (else: "RUN is being written by pid N"),
* a directory holding nothing but what lazyscope writes into a run (the record files, views,
  ``graphs/``, ``tensorboard/``, ``rank<N>/`` runs): never a file of the user's beside them,
* that holds neither the current directory nor the script being traced,

and only when the whole old run can be removed: it is moved aside under its lock, the new
directory created and locked, and only then the old one deleted. A default name
(``runs/NAME-TIMESTAMP``) is created exclusively: a second trace started in the same second
takes ``NAME-TIMESTAMP-2``, never the first one's directory.

:func:`prepare_run_dir` returns a :class:`RunDir`: the absolute path, a descriptor of the
directory (the writer creates its files relative to it, so a program that changes its working
directory, or renames the run directory, does not move them) and the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lazyscope.core.errors import OutputError, RunDirError, show_path
from lazyscope.store.layout import (
    LOCK_FILE,
    META_FILE,
    RANK_DIR,
    RUN_DIRS,
    RUN_FILES,
    WRITE_TEST,
)
from lazyscope.store.lock import RunLock, describe_holder, writer_of

_RUN_FILE_RE = re.compile(r"^(?:[\w.-]+\.png|[\w.-]+\.tmp)$")
#: the largest meta.json read to decide whether a directory is a run (a failed run keeps at
#: most a few KiB of its error there; a huge file named meta.json is not ours)
MAX_META_BYTES = 64 << 20


def rank_dir(run_dir: str | os.PathLike[str], rank: int) -> Path:
    """``RUN/rank<N>``: where rank ``rank`` of a multi-process run writes its run."""
    return Path(run_dir) / RANK_DIR.format(rank=rank)


def rank_of(path: Path) -> int | None:
    """The rank a directory named ``rank<N>`` holds; None for any other name."""
    name = Path(path).name
    return int(name[4:]) if name.startswith("rank") and name[4:].isdigit() else None


def rank_dirs(path: Path) -> dict[int, Path]:
    """``{rank: RUN/rank<N>}`` for the rank subdirectories of a multi-process run."""
    out = {}
    try:
        for p in Path(path).iterdir():
            rank = rank_of(p)
            if rank is not None and is_run_dir(p):
                out[rank] = p
    except OSError:
        return {}
    return dict(sorted(out.items()))


def host_dirs(path: Path) -> dict[int, Path]:
    """``{host: RUN/host<N>}`` for the hosts' parts of a run written to a URL (each a run, or
    the ``rank<N>/`` runs of a multi-process host)."""
    out = {}
    try:
        for p in Path(path).iterdir():
            name = p.name
            if name.startswith("host") and name[4:].isdigit() and (is_run_dir(p) or rank_dirs(p)):
                out[int(name[4:])] = p
    except OSError:
        return {}
    return dict(sorted(out.items()))


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
        if meta.stat().st_size > MAX_META_BYTES:
            return False
        raw = json.loads(meta.read_bytes().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return (isinstance(raw, dict) and isinstance(raw.get("schema_version"), int)
            and not isinstance(raw.get("schema_version"), bool)
            and isinstance(raw.get("backend"), str))


def _inside(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies inside it (both resolved)."""
    try:
        a, b = inner.resolve(), outer.resolve()
    except (OSError, RuntimeError):  # Python < 3.13 raises RuntimeError on a symlink loop
        return False
    return a == b or b in a.parents


def _contains_cwd(path: Path) -> bool:
    try:
        return _inside(Path.cwd(), path)
    except OSError:
        return False


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


def _foreign_entries(path: Path, depth: int = 0) -> list[str]:
    """Entries of the run directory ``path`` that lazyscope does not write there (the user's
    files: ``--force`` never deletes them), as names relative to ``path``."""
    found: list[str] = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        name = entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and (name in RUN_FILES or _RUN_FILE_RE.match(name)):
            continue
        if is_dir and name in RUN_DIRS:
            continue
        if is_dir and rank_of(Path(name)) is not None and depth == 0 and \
                is_run_dir(Path(entry.path)):
            found += [f"{name}/{n}" for n in _foreign_entries(Path(entry.path), depth + 1)]
            continue
        found.append(name + ("/" if is_dir else ""))
    return found


def _busy(path: Path) -> RunDirError | None:
    holder = writer_of(path)
    if holder is None:
        return None
    return RunDirError(f"{show_path(path)} is being written by {describe_holder(holder)}; "
                       "wait for it to end, or choose another --out")


def _check_replaceable(path: Path, protect: tuple[Path, ...]) -> None:
    """Refuse (RunDirError / OutputError) to replace the existing, non-empty ``path``."""
    shown = show_path(path)
    if not is_run_dir(path) and not rank_dirs(path):
        raise RunDirError(f"{shown} is not empty and is not a lazyscope run; refusing to "
                          "replace it")
    if _contains_cwd(path):
        raise RunDirError(f"{shown} holds the current directory; refusing to replace it")
    for p in protect:
        if _inside(p, path):
            raise RunDirError(f"{shown} holds {show_path(p)}, which this trace needs; refusing "
                              "to replace it")
    foreign = _foreign_entries(path)
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise RunDirError(
            f"{shown} holds files lazyscope did not write ({', '.join(map(show_path, foreign[:3]))}"
            f"{more}); refusing to replace it (move them, or choose another --out)")
    why = _unwritable(path)
    if why is not None:
        raise OutputError.from_os(why, path, replacing=True)


def _path_max() -> int:
    """The longest path the system opens, in bytes (Linux: 4096 with the terminating NUL)."""
    try:
        return int(os.pathconf("/", "PC_PATH_MAX")) - 1
    except (AttributeError, OSError, ValueError):
        return 4095


PATH_MAX = _path_max()
#: the longest name inside a run directory (tensorboard/events.out.tfevents.<time>.<host>...)
LONGEST_RUN_FILE = 120


def check_run_dir(path: Path, force: bool, *, protect: tuple[Path, ...] = ()) -> bool:
    """Refuse ``path`` as a run directory (RunDirError / OutputError, exit 3) for every reason
    that can be known without changing anything; True when an old run there will be replaced.

    Cheap and side-effect free, so a trace calls it before importing its backend (seconds for
    torch_xla): a mistyped ``--out`` is refused at once. :func:`prepare_run_dir` checks again
    under the directory's lock. ``protect``: paths that must survive (the script being traced).
    """
    path = Path(path)
    if str(path) in ("", "."):
        raise RunDirError("the output directory must be a new directory, not the current one")
    shown = show_path(path)
    own = len(os.fsencode(os.path.abspath(path)))
    longest = own + LONGEST_RUN_FILE
    if own <= PATH_MAX < longest:  # its files could be written (relative), never read back
        raise OutputError(f"cannot write {shown}: its files' paths would be {longest} bytes, "
                          f"past the system's {PATH_MAX} (choose a shorter --out)")
    try:
        if path.is_symlink():
            target = os.readlink(path)
            raise RunDirError(f"{shown} is a symbolic link (to {show_path(target)}); give the "
                              "real directory or a new path")
        for parent in path.parents:
            if parent.is_symlink() and not parent.exists():
                try:
                    os.stat(parent)
                except OSError as err:
                    if err.errno == errno.ELOOP:  # a loop, not a dangling link
                        raise OutputError.from_os(OSError(err.errno, err.strerror, str(path)),
                                                  path) from None
                raise OutputError(f"cannot write {shown}: {show_path(parent)} is a symbolic "
                                  f"link to {show_path(os.readlink(parent))}, which does not "
                                  "exist")
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{shown} exists and is not a directory")
        if path.is_dir() and any(p.name != LOCK_FILE for p in path.iterdir()):
            busy = _busy(path)
            if busy is not None:
                raise busy
            if not force:
                raise RunDirError(f"{shown} already exists; pass --force to replace it")
            _check_replaceable(path, tuple(Path(p) for p in protect))
            return True
        if path.is_dir():
            busy = _busy(path)
            if busy is not None:
                raise busy
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


#: descriptors lazyscope keeps for a whole run are moved above this number, away from the low
#: numbers a program reuses
HIGH_FD = 64


def high_fd(fd: int) -> int:
    """``fd`` moved to a close-on-exec descriptor of lazyscope's own above :data:`HIGH_FD`."""
    try:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    except OSError:
        return fd
    os.close(fd)
    return new


@dataclass
class RunDir:
    """A run directory made for one trace: its absolute ``path``, a descriptor of it
    (``dir_fd``: files are created relative to it), and the lock the trace holds on it."""

    path: Path
    dir_fd: int
    lock: RunLock | None = None
    #: (st_dev, st_ino) of the directory, to tell a descriptor number reused by the program
    ident: tuple[int, int] = field(default=(0, 0))
    #: the directory was made for this trace (not one the user had made, empty)
    made: bool = False

    def abandon(self) -> None:
        """The run could not even begin (its first file could not be written): leave nothing
        behind when this trace made the directory (its lock file, unlinked while the lock is
        still held, then the directory if empty); a directory that was there stays as it was,
        its lock file too (another trace may be waiting on it). Then close."""
        if self.made:
            with contextlib.suppress(OSError):
                os.unlink(LOCK_FILE, dir_fd=self.dir_fd)
            with contextlib.suppress(OSError):
                os.rmdir(self.path)  # only when empty: a file written there stays
        self.close()

    @classmethod
    def open(cls, path: Path, lock: RunLock | None = None) -> RunDir:
        fd = high_fd(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        st = os.fstat(fd)
        return cls(Path(path), fd, lock, (st.st_dev, st.st_ino))

    def valid_fd(self) -> int | None:
        """The directory's descriptor, unless the program closed it (or it now names another
        file)."""
        try:
            st = os.fstat(self.dir_fd)
        except OSError:
            return None
        return self.dir_fd if (st.st_dev, st.st_ino) == self.ident else None

    def where(self) -> Path | None:
        """Where the directory is now: its path, the new path if it was renamed while the run
        was written, None if it was removed."""
        fd = self.valid_fd()
        if fd is None:
            return self.path if os.path.isdir(self.path) else None
        try:
            if os.fstat(fd).st_nlink == 0:
                return None
        except OSError:
            return None
        try:
            now = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return self.path
        return now if now.is_absolute() and now.is_dir() else self.path

    def io_path(self) -> Path:
        """A path that reaches the directory wherever it now is (``/proc/self/fd/N`` where the
        system has it), for code that takes paths (XLA's HLO files, the profiler)."""
        fd = self.valid_fd()
        if fd is not None and os.path.isdir(f"/proc/self/fd/{fd}"):
            return Path(f"/proc/self/fd/{fd}")
        return self.path

    def close(self) -> None:
        """Release the lock and the descriptor (never in a forked child)."""
        if self.lock is not None:
            self.lock.release()
        if self.dir_fd >= 0 and self.valid_fd() is not None:
            with contextlib.suppress(OSError):
                os.close(self.dir_fd)
        self.dir_fd = -1

    def forget(self) -> None:
        """A forked child: drop the handles without releasing the parent's lock."""
        if self.lock is not None:
            self.lock.forget()
        self.dir_fd = -1


def _make(path: Path, *, exclusive: bool) -> bool:
    """mkdir ``path`` (and its parents); False when it exists already (``exclusive``: only a
    directory made here counts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        if exclusive or not path.is_dir():
            return False
    return True


def _probe(rd: RunDir) -> None:
    fd = os.open(WRITE_TEST, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644,
                 dir_fd=rd.dir_fd)
    os.close(fd)
    os.unlink(WRITE_TEST, dir_fd=rd.dir_fd)


def _locked(path: Path, since: str, command: str = "") -> RunDir:
    """The directory at ``path``, locked. Another trace with --force may replace the directory
    while this one waits for its lock (it moves the old run aside and deletes it): the lock then
    won is the deleted directory's, so it is taken again on what ``path`` is now."""
    for _ in range(3):
        rd = RunDir.open(path)
        try:
            rd.lock = RunLock.acquire(rd.dir_fd, path, since=since, command=command)
        except BaseException:
            os.close(rd.dir_fd)
            raise
        try:
            st = os.stat(path)
            same = (st.st_dev, st.st_ino) == rd.ident
        except OSError:
            same = False
        if same:
            return rd
        rd.close()
    raise RunDirError(f"{show_path(path)} was replaced by another process while this trace "
                      "waited for it; choose another --out, or try again")


def prepare_run_dir(path: Path, force: bool, *, protect: tuple[Path, ...] = (),
                    unique: bool = False, since: str = "", command: str = "") -> RunDir:
    """Make ``path`` an empty directory for a new run, locked by this process, or refuse with
    a RunDirError / OutputError (exit 3) that says why (see the module docstring).

    ``unique``: ``path`` is a default name: it is created exclusively, and when it exists the
    first free ``path-2``, ``path-3`` ... is taken instead (``RunDir.path`` says which).
    ``since`` and ``command`` describe the writer in the lock (for another process's message).
    """
    path = Path(os.path.abspath(path))
    if unique:
        return _prepare_unique(path, protect, since, command)
    check_run_dir(path, force, protect=protect)
    try:
        # made: this process's mkdir made it (another trace may make it at the same instant)
        made = _make(path, exclusive=True)
        rd = _locked(path, since, command)
    except OSError as err:  # no lock was taken: nothing of another trace's is touched
        raise OutputError.from_os(err, path) from None
    try:
        if any(n != LOCK_FILE for n in os.listdir(rd.dir_fd)):
            if not force:
                raise RunDirError(f"{show_path(path)} already exists; pass --force to replace it")
            _check_replaceable(path, tuple(Path(p) for p in protect))
            return _replace(path, rd, since, command)
        _probe(rd)
    except OSError as err:
        rd.made = made
        rd.abandon()
        raise OutputError.from_os(_named(err, path), path) from None
    except BaseException:
        rd.close()
        raise
    rd.made = made
    return rd


def _named(err: OSError, path: Path) -> OSError:
    if err.filename and str(err.filename).endswith(WRITE_TEST):
        err.filename = str(path)
    return err


def _prepare_unique(path: Path, protect: tuple[Path, ...], since: str,
                    command: str) -> RunDir:
    for n in range(1, 10000):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        if os.path.lexists(candidate):
            continue
        check_run_dir(candidate, False, protect=protect)
        try:
            if not _make(candidate, exclusive=True):
                continue
            rd = _locked(candidate, since, command)
        except OSError as err:
            raise OutputError.from_os(err, candidate) from None
        rd.made = True
        try:
            _probe(rd)
        except OSError as err:
            rd.abandon()
            raise OutputError.from_os(_named(err, candidate), candidate) from None
        return rd
    raise RunDirError(f"{show_path(path)}: no free name (tried -2 ... -9999)")


def _replace(path: Path, old: RunDir, since: str, command: str) -> RunDir:
    """Replace the locked old run at ``path`` by a new, locked, empty directory: move the old
    one aside, make the new one, delete the old one; a failure before the deletion puts the
    old run back."""
    aside = path.with_name(f".{path.name}.lazyscope-old-{os.getpid()}")
    try:
        os.rename(path, aside)
    except OSError:
        old.close()
        raise
    new: RunDir | None = None
    try:
        if not _make(path, exclusive=True):
            raise RunDirError(f"{show_path(path)} was created by another process while the old "
                              f"run was moved aside; the old run is kept in {show_path(aside)}")
        new = _locked(path, since, command)
        _probe(new)
    except BaseException:
        if new is not None:
            new.close()
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
            else:
                shutil.rmtree(path)
        with contextlib.suppress(OSError):
            os.rename(aside, path)
        old.close()
        raise
    shutil.rmtree(aside, ignore_errors=True)
    old.close()
    return new
