"""A run read while another process writes it (``lazyscope watch``): where it is, whether it
exists yet, who writes it, and its records so far.

:func:`follow` is the one place that turns what the user named into something to read: a
local run directory (:class:`LocalRun`), or a URL (:class:`RemoteRun`: one host's part of a run
written to a bucket, ``gs://bucket/run/host<N>``, downloaded as it changes). Reading a run while it is written is safe: records are copied into memory maps
padded with zeros (the reader stops at the padding and drops a half-written last record),
``meta.json`` is replaced atomically, and the writer's lock (:mod:`lazyscope.store.lock`) says
whether it still writes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from lazyscope.core.errors import RunDirError, show_path
from lazyscope.model import Run
from lazyscope.store.layout import MANIFEST_FILE, META_FILE, RUN_DIRS, RUN_FILES, UPLOAD_FILE
from lazyscope.store.lock import writer_of
from lazyscope.store.reader import load_run
from lazyscope.store.remote import INDEX_FILE, download, host_dir_name, is_remote, local_path
from lazyscope.store.rundir import host_dirs, is_run_dir, rank_dirs

#: what a download of a run's part holds before the part's first upload is complete: its
#: heartbeat, its manifest, the download's own index
STARTING = frozenset({UPLOAD_FILE, MANIFEST_FILE, INDEX_FILE})

#: what :meth:`LocalRun.state` says
MISSING = "missing"  # nothing there yet, or a directory a trace is just creating
RUN = "run"  # a lazyscope run (being written or not)
NOT_A_RUN = "not a run"  # something else: its reason in LocalRun.why


class LocalRun:
    """A run directory on this machine."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.name = show_path(self.path)
        self.why = ""

    def state(self) -> str:
        """:data:`MISSING`, :data:`RUN` or :data:`NOT_A_RUN` (then :attr:`why` says why)."""
        p = self.path
        try:
            if not p.exists():
                return MISSING
            if not p.is_dir():
                self.why = f"{self.name} is not a directory (expected a lazyscope run directory)"
                return NOT_A_RUN
            if is_run_dir(p):
                return RUN
            if rank_dirs(p):
                self.why = (f"{self.name} is a multi-process run: watch one rank's run "
                            f"({show_path(next(iter(rank_dirs(p).values())))})")
                return NOT_A_RUN
            names = os.listdir(p)
        except OSError as err:
            self.why = f"{self.name}: {err.strerror or err}"
            return NOT_A_RUN
        if (p / META_FILE).exists():
            self.why = f"{self.name} is not a lazyscope run ({META_FILE} is not lazyscope's)"
            return NOT_A_RUN
        # a run file's ``.tmp`` is an atomic write in progress (meta.json.tmp just before the
        # rename that makes the run): a trace starting, like the files it writes first; a
        # download of a part whose first upload is under way holds its heartbeat
        foreign = [n for n in names if n not in RUN_FILES and n not in RUN_DIRS
                   and n.removesuffix(".tmp") not in RUN_FILES and n not in STARTING]
        if foreign:
            self.why = (f"{self.name} is not a lazyscope run (no {META_FILE}; it holds "
                        f"{', '.join(sorted(foreign)[:3])}{' ...' if len(foreign) > 3 else ''})")
            return NOT_A_RUN
        return MISSING  # empty, or only what a trace writes before its meta.json: starting

    def writer(self) -> dict[str, Any] | None:
        """Who writes the run now (the lock's info), None when no live process does."""
        return writer_of(self.path)

    def load(self) -> Run:
        """The run as written so far."""
        return load_run(self.path)


class RemoteRun:
    """One host's part of a run at a URL, read through a local copy refreshed at most once a
    second (only what changed is fetched). Its writer is on another machine: it counts as
    writing while ``meta.json`` says running and its heartbeat is fresh
    (:func:`~lazyscope.store.remote.heard_from`)."""

    REFRESH_S = 1.0

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.name = self.url
        self.why = ""
        self._local: LocalRun | None = None
        self._fetched_at = -1e9

    def _refresh(self) -> LocalRun | None:
        now = time.monotonic()
        if self._local is not None and now - self._fetched_at < self.REFRESH_S:
            return self._local
        try:
            path = download(self.url)
        except RunDirError:
            return self._local
        self._fetched_at = now
        self._local = LocalRun(path)
        return self._local

    def state(self) -> str:
        local = self._refresh()
        if local is None:
            return MISSING
        state = local.state()
        if state == NOT_A_RUN:
            hosts = host_dirs(local.path)
            if hosts:
                self.why = (f"{self.name} is a pod: watch one host's part ({self.name}/"
                            f"{host_dir_name(next(iter(hosts)))}); `lazyscope report "
                            f"{self.name}` reads every host")
            else:
                self.why = local.why.replace(str(local.path), self.name)
        return state

    def writer(self) -> dict[str, Any] | None:
        local = self._refresh()
        if local is None:
            return None
        try:
            heard = load_run(local.path).written_by  # running, and its heartbeat is fresh
        except RunDirError:
            return None
        return {"command": f"a trace uploading to {self.name}: {heard}"} if heard else None

    def load(self) -> Run:
        local = self._refresh()
        if local is None:
            raise RunDirError(f"{self.name} holds nothing yet")
        return local.load()


def follow(target: str | os.PathLike[str]) -> LocalRun | RemoteRun:
    """What ``lazyscope watch TARGET`` reads (see the module docstring)."""
    if isinstance(target, str) and is_remote(target):
        return RemoteRun(target)
    return LocalRun(local_path(target))
