"""The lock a live trace holds on its run directory, for as long as it writes it.

A run directory belongs to one trace at a time. The writer holds an exclusive ``flock`` on
``RUN/.lock`` from before its first file is written until its run is finalised; the file holds
who that is (pid, host, command, start time), for messages. So:

* a second trace into the same directory, with or without ``--force``, is refused while the
  first one runs ("RUN is being written by pid N ..."), and so is ``--force`` replacing it;
* two ``--force`` replacing one old run at the same time: one of them wins, the other is
  refused;
* a reader (``report``, ``check``) can tell a run still being written from one whose writer was
  killed (:func:`writer_of`).

The kernel releases the lock when the writer dies, however it dies (SIGKILL included). The
lock is on the open file description: a forked child shares it and never releases it on its
own. The ``.lock`` file stays in a finished run (an empty lock held by nobody).

Readers test the lock with a shared lock taken and released at once; a writer that finds the
lock taken retries for a moment before refusing, so such a test never makes it refuse.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from lazyscope.core.errors import RunDirError, show_path
from lazyscope.store.layout import LOCK_FILE

#: how long a writer retries a taken lock before it refuses (a reader's test holds it for
#: microseconds)
RETRY_SECONDS = 0.5


def _open(dir_fd: int) -> int:
    return os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644,
                   dir_fd=dir_fd)


def _read_info(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8", "replace") or "{}")
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def describe_holder(info: dict[str, Any]) -> str:
    """``pid 1234 (lazyscope trace a.py, since 2026-11-24T06:17:04)`` from a lock's info."""
    pid = info.get("pid")
    text = f"pid {pid}" if isinstance(pid, int) else "another process"
    host = info.get("host")
    if isinstance(host, str) and host and host != socket.gethostname():
        text += f" on {host}"
    extra = []
    if isinstance(info.get("command"), str) and info["command"]:
        extra.append(info["command"])
    if isinstance(info.get("since"), str) and info["since"]:
        extra.append(f"since {info['since']}")
    return text + (f" ({', '.join(extra)})" if extra else "")


def short_holder(info: dict[str, Any]) -> str:
    """``pid 1234 (host)`` from a lock's info: who writes a run, said by a report of it."""
    pid = info.get("pid")
    text = f"pid {pid}" if isinstance(pid, int) else "another process"
    host = info.get("host")
    return text + (f" ({host})" if isinstance(host, str) and host else "")


class RunLock:
    """An exclusive lock on ``RUN/.lock`` (see the module docstring)."""

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path

    @classmethod
    def acquire(cls, dir_fd: int, path: Path, *, since: str = "", command: str = "") -> RunLock:
        """Lock the run directory open as ``dir_fd`` (shown as ``path``); RunDirError (exit 3)
        naming the holder when a live process holds it."""
        fd = _open(dir_fd)
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                info = _read_info(fd)
                os.close(fd)
                raise RunDirError(
                    f"{show_path(path)} is being written by {describe_holder(info)}; wait for "
                    "it to end, or choose another --out") from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command[:200],
                "since": since or time.strftime("%Y-%m-%dT%H:%M:%S")}
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
        return cls(fd, path)

    def release(self) -> None:
        """Give the lock up (its file stays); a no-op in a process that did not take it."""
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.close(fd)

    def forget(self) -> None:
        """Drop this process's handle without unlocking (a forked child: the lock is its
        parent's)."""
        self.fd = -1


def writer_of(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who holds the lock of the run at ``path`` now (its lock file's info), or None when no
    live process does (a finished or killed run, or no lock file)."""
    try:
        fd = os.open(Path(path) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW |
                     os.O_NONBLOCK)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return _read_info(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
