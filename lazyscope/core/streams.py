"""lazyscope's own stdout and stderr: what it writes survives what the traced program does to
the process's streams, and a stream that cannot be written is one line and an exit code.

The program ``lazyscope trace`` runs shares the process with lazyscope: file descriptors 1 and
2, and the Python objects ``sys.stdout`` / ``sys.stderr``. It may close them (``os.close(1)``,
``sys.stdout.close()``), point them elsewhere (``os.dup2(devnull, 2)``) or replace them
(``sys.stdout = io.StringIO()``). So :func:`capture`, called by the CLI before anything else,
duplicates fds 1 and 2 (close-on-exec: a child process never inherits the copies) into streams
of lazyscope's own, and everything lazyscope writes goes there: the report after the program
ended, and the final ``lazyscope: ...`` line, whatever the program did.

Writing errors are not tracebacks:

* EPIPE (the reader of stdout went away: ``lazyscope report RUN | head -1``) raises
  :class:`~lazyscope.core.errors.BrokenOutput`: nothing more is written, no line, exit 141;
* any other error on stdout (a full disk: ``> /dev/full``; a closed descriptor) raises
  :class:`~lazyscope.core.errors.OutputError` once ("cannot write to stdout: ...", exit 3);
* an error on stderr is dropped: there is nowhere left to say it.

Text is written with ``errors="backslashreplace"``: a character the terminal's encoding cannot
show (``PYTHONIOENCODING=ascii``) is escaped, never an exception.

:func:`ours` makes ``sys.stdout``/``sys.stderr`` these streams (for code that prints through
them: click, rich); :func:`theirs` gives the program the objects it had, for as long as it
runs, and keeps what it leaves there for the interpreter's own exit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from lazyscope.core.errors import BrokenOutput, OutputError

#: private copies are moved above this descriptor number (out of the way of programs that
#: reuse low numbers)
_MIN_FD = 64


def _ident(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class SafeStream(io.TextIOBase):
    """A text stream on a private copy of descriptor ``origin`` (1 or 2), or on a borrowed
    stream object; see the module docstring.

    The copy is checked (device and inode) after the program ran: a program that closes every
    descriptor (a daemon's ``os.closerange(3, ...)``) and opens files of its own may have taken
    its number, and lazyscope never writes into the program's file; it takes a new copy of the
    original descriptor when that still is what lazyscope started with."""

    def __init__(self, origin: int | None, name: str, encoding: str,
                 stream: TextIO | None = None):
        super().__init__()
        self.name = name
        self._origin = origin
        self._encoding = encoding
        self._tty = False
        self._raw: TextIO | None = stream
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        #: the stream is someone else's (not closed here)
        self._borrowed = stream is not None
        self.failed: OSError | None = None
        if stream is not None:
            with contextlib.suppress(Exception):
                self._tty = bool(stream.isatty())
        elif origin is not None:
            self._ident = _ident(origin)
            if self._ident is not None:
                self._open(_private_copy(origin))

    def _open(self, fd: int | None) -> None:
        self._fd = fd
        if fd is None:
            self._raw = None
            return
        try:
            self._tty = os.isatty(fd)
        except OSError:
            self._tty = False
        # closefd=False: the descriptor is closed here, after checking it still is ours
        self._raw = io.TextIOWrapper(
            open(fd, "wb", closefd=False), encoding=self._encoding,  # noqa: SIM115
            errors="backslashreplace", line_buffering=self._tty or self.name == "stderr")

    def _drop(self) -> None:
        """Forget the wrapper without writing or closing anything."""
        raw, self._raw = self._raw, None
        if raw is not None and not self._borrowed:
            with contextlib.suppress(Exception):
                raw.detach().detach()  # type: ignore[attr-defined]

    def revalidate(self) -> None:
        """After the program ran: keep writing only to a descriptor that still is ours."""
        if self._borrowed or self._fd is None or _ident(self._fd) == self._ident:
            return
        self._drop()
        fresh = None
        if self._origin is not None and _ident(self._origin) == self._ident:
            fresh = _private_copy(self._origin)
        self._open(fresh)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "backslashreplace"

    def isatty(self) -> bool:
        return self._tty

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("no descriptor")
        return self._fd

    def _broken(self, err: BaseException) -> None:
        """Remember the first failure; raise what the CLI turns into its exit (stdout only)."""
        first = self.failed is None
        if isinstance(err, OSError):
            self.failed = err
        else:  # ValueError: the copy was closed under us
            self.failed = OSError(errno.EBADF, os.strerror(errno.EBADF))
        # drop what is buffered: it cannot be written, and must not be retried at exit
        self._drop()
        self._close_fd()
        if self.name != "stdout" or not first:
            return
        if self.failed.errno == errno.EPIPE:
            raise BrokenOutput()
        reason = self.failed.strerror or str(self.failed)
        raise OutputError(f"cannot write to stdout: {reason}")

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None and _ident(fd) == self._ident:
            with contextlib.suppress(OSError):
                os.close(fd)

    def write(self, text: str) -> int:
        if self._raw is None:
            if self.failed is None and self.name == "stdout":
                self._broken(OSError(errno.EBADF, "it was closed when lazyscope started"
                                     if self._ident is None else "the program closed it"))
            return len(text)
        try:
            self._raw.write(text)
            if self._tty or self.name == "stderr":
                self._raw.flush()
        except (OSError, ValueError) as err:
            self._broken(err)
        return len(text)

    def flush(self) -> None:
        if self._raw is None:
            return
        try:
            self._raw.flush()
        except (OSError, ValueError) as err:
            self._broken(err)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.flush()
        if self._borrowed:
            self._raw = None
        else:
            self._drop()
            self._close_fd()
        super().close()


def _private_copy(fd: int) -> int | None:
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _MIN_FD)
    except OSError:
        return None


class _Streams:
    out: SafeStream | None = None
    err: SafeStream | None = None
    #: what ``sys.stdout`` / ``sys.stderr`` were when lazyscope took them (the program's)
    saved: tuple[TextIO, TextIO] | None = None


_S = _Streams()


def _encoding_of(stream: object) -> str:
    enc = getattr(stream, "encoding", None)
    return enc if isinstance(enc, str) and enc else "utf-8"


def _stream(fd: int, current: object, original: object, name: str) -> SafeStream:
    if current is not original and current is not None:
        return SafeStream(None, name, _encoding_of(current), stream=current)  # type: ignore[arg-type]
    return SafeStream(fd, name, _encoding_of(current))


def capture() -> None:
    """Take lazyscope's streams (see the module docstring); call before any program code.
    Each call after :func:`release` takes them afresh."""
    if _S.out is not None:
        return
    _S.out = _stream(1, sys.stdout, sys.__stdout__, "stdout")
    _S.err = _stream(2, sys.stderr, sys.__stderr__, "stderr")


def release() -> None:
    """Flush (errors dropped) and close lazyscope's streams."""
    for stream in (_S.out, _S.err):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
    _S.out = _S.err = None


def out() -> SafeStream:
    capture()
    assert _S.out is not None
    return _S.out


def err() -> SafeStream:
    capture()
    assert _S.err is not None
    return _S.err


def echo(text: str = "", *, to_err: bool = False, nl: bool = True) -> None:
    """Write ``text`` (and a newline) to lazyscope's stdout or stderr."""
    stream = err() if to_err else out()
    stream.write(text + ("\n" if nl else ""))
    if to_err:
        stream.flush()


def revalidate() -> None:
    """Check lazyscope's descriptors after program code ran (see :meth:`SafeStream.revalidate`)."""
    for stream in (_S.out, _S.err):
        if stream is not None:
            stream.revalidate()


def flush() -> None:
    """Flush lazyscope's stdout (raises as a write does) and stderr."""
    if _S.out is not None:
        _S.out.flush()
    if _S.err is not None:
        _S.err.flush()


@contextlib.contextmanager
def ours() -> Iterator[None]:
    """``sys.stdout``/``sys.stderr`` are lazyscope's streams inside; afterwards they are what
    was there before (or what the traced program left there: see :func:`theirs`)."""
    capture()
    _S.saved = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = out(), err()
    try:
        yield
    finally:
        saved, _S.saved = _S.saved, None
        if saved is not None:
            sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def theirs() -> Iterator[None]:
    """Inside :func:`ours`: the program's own ``sys.stdout``/``sys.stderr`` while it runs; what
    it leaves there is what the interpreter flushes at exit."""
    if _S.saved is None:
        yield
        return
    flush()
    sys.stdout, sys.stderr = _S.saved
    try:
        yield
    finally:
        _S.saved = (sys.stdout, sys.stderr)
        revalidate()
        sys.stdout, sys.stderr = out(), err()


__all__ = ["SafeStream", "capture", "echo", "err", "flush", "ours", "out", "release", "revalidate",
           "theirs"]
