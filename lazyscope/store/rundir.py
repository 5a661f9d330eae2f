"""The run directory as a place: what counts as a lazyscope run, the checks before one is made
or replaced (``--force`` replaces only a lazyscope run, never the current directory), and the
one place that names the rank directories of a multi-process run (``RUN/rank<N>``)."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

from lazyscope.errors import OutputError, RunDirError
from lazyscope.store.records import META_FILE

#: the run directory of rank N of a multi-process run, inside the run's own directory
RANK_DIR = "rank{rank}"


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
