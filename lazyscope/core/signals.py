"""Termination signals finalise a trace the way Ctrl-C does.

Python turns SIGINT into ``KeyboardInterrupt``, which the runner finalises as ``interrupted``;
every other signal whose default is to terminate (SIGTERM from ``kill`` or a job scheduler,
SIGHUP when the terminal goes, SIGQUIT, SIGUSR1/2) would kill the process where it stands,
leaving the run ``running`` and saying nothing. :func:`handlers` installs, for the life of a
command, a handler for each of them that raises :class:`Terminated` in the main thread, a
``BaseException`` like ``KeyboardInterrupt``: the run is finalised (status ``interrupted``,
"terminated by SIGTERM") and the CLI exits 128 + N with one line.

Only where the disposition is still the default: a signal the program (or ``nohup``) ignores
stays ignored; a handler the program installs later replaces this one, and wins. A forked child
(a ``DataLoader`` worker) gets the default dispositions back, so it dies of these signals as it
would untraced; so does any process other than the one that installed them.

:func:`deferred` holds a signal back while lazyscope finalises a run, and raises it after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from lazyscope.core.errors import signal_name

#: the signals that terminate a process by default and can be caught
TERMINATIONS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name))


class Terminated(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """A termination signal arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal_name(signum)}")
        self.signum = signum


class _State:
    owner: int = -1
    installed: set[int] = set()
    deferring: int = 0
    pending: list[int] = []
    fork_hook = False


_S = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _S.owner:
        # not the process that installed it (a child made by a C-level fork): die as untraced
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _S.deferring:
        _S.pending.append(signum)
        return
    raise Terminated(signum)


def _reset_in_child() -> None:
    for signum in list(_S.installed):
        with contextlib.suppress(Exception):
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, signal.SIG_DFL)
    _S.installed = set()
    _S.pending = []
    _S.deferring = 0


def install() -> list[int]:
    """Install the handler for each termination signal whose disposition is the default (main
    thread only); the signals it was installed for."""
    if threading.current_thread() is not threading.main_thread():
        return []
    if not _S.fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_reset_in_child)
        _S.fork_hook = True
    _S.owner = os.getpid()
    done = []
    for signum in TERMINATIONS:
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _handler)
                _S.installed.add(int(signum))
                done.append(int(signum))
        except (OSError, ValueError):
            continue
    return done


def uninstall(signums: list[int]) -> None:
    """Give ``signums`` their default disposition back, where the handler is still this one."""
    for signum in signums:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, signal.SIG_DFL)
        _S.installed.discard(signum)


@contextlib.contextmanager
def handlers() -> Iterator[None]:
    """The handlers for the duration of the block (see the module docstring)."""
    done = install()
    try:
        yield
    finally:
        uninstall(done)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold termination signals back inside the block (a run being finalised); the first one
    that arrived is raised at its end."""
    _S.deferring += 1
    try:
        yield
    finally:
        _S.deferring -= 1
        if not _S.deferring and _S.pending:
            signum = _S.pending[0]
            _S.pending = []
            raise Terminated(signum)


__all__ = ["TERMINATIONS", "Terminated", "deferred", "handlers", "install", "uninstall"]
