"""XLA's HLO dump directory for a trace: one per process (made by :mod:`~.session`), in RAM when
there is room, removed at exit, and swept when a killed trace left one behind. XLA reads
``XLA_FLAGS`` once per process. Helpers to read and edit ``XLA_FLAGS``' ``--xla_dump_to``."""

from __future__ import annotations

import glob
import os
import shlex
import shutil

DUMP_FLAG = "--xla_dump_to"
#: the dump directory lazyscope chose for this process (XLA reads XLA_FLAGS once per process)
OWN_DUMP_ENV = "LAZYSCOPE_XLA_DUMP_DIR"



#: RAM-backed directory for XLA's dump when it has this much room (the CPU backend also dumps
#: LLVM IR and objects for every kernel: ~800 files per compiled training step of the tiny
#: decoder; written to disk they added ~25% to compile time, to tmpfs a few %)
SHM_DIR, SHM_MIN_FREE = "/dev/shm", 1 << 30


def fast_tmp() -> str | None:
    """``/dev/shm`` when it is a writable directory with room, else the default temp dir."""
    try:
        st = os.statvfs(SHM_DIR)
        if os.access(SHM_DIR, os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
            return SHM_DIR
    except OSError:
        pass
    return None


DUMP_PREFIX = "lazyscope-hlo-"


def dump_dir_owner_alive(path: str | os.PathLike[str]) -> bool:
    """Whether the lazyscope process that made dump directory ``path`` still runs (its name
    carries that pid); a name without a pid counts as alive (never ours to remove)."""
    pid = os.path.basename(path)[len(DUMP_PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but not ours to signal: alive
        return True
    return True


def sweep_stale_dump_dirs(base: str) -> None:
    """Remove dump directories of lazyscope processes that no longer run (a SIGKILLed trace
    cannot remove its own)."""
    for path in glob.glob(os.path.join(glob.escape(base), DUMP_PREFIX + "*")):
        if not dump_dir_owner_alive(path):
            shutil.rmtree(path, ignore_errors=True)


def remove_dump_flag(xla_flags: str) -> str:
    """``XLA_FLAGS`` without its ``--xla_dump_to``."""
    try:
        words = shlex.split(xla_flags)
    except ValueError:
        words = xla_flags.split()
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith(DUMP_FLAG + "="):
            continue
        if word == DUMP_FLAG:
            skip = True
            continue
        out.append(word)
    return " ".join(shlex.quote(w) for w in out)


def dump_dir(xla_flags: str) -> str | None:
    """The ``--xla_dump_to`` directory in an ``XLA_FLAGS`` value, if any."""
    try:
        words = shlex.split(xla_flags)
    except ValueError:
        words = xla_flags.split()
    found = None
    for i, word in enumerate(words):
        if word.startswith(DUMP_FLAG + "="):
            found = word.split("=", 1)[1]
        elif word == DUMP_FLAG and i + 1 < len(words):
            found = words[i + 1]
    return found or None
