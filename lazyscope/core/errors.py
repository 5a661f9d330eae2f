"""Errors that reach the user as one clear line and a documented exit code.

Every failure lazyscope can foresee raises a subclass of :class:`LazyscopeError`; the CLI's
``main()`` prints ``lazyscope: <message>`` on stderr (no traceback) and returns ``exit_code``.

Exit codes (also in docs/faults.md):

====  ====================================================================
0     success
1     a ``lazyscope check`` rule was violated (a finding, not an error)
2     bad input: unknown scenario, bad option value, unreadable script, a value the Python
      API refuses (a tensor handed to ``lazyscope.annotate_step``), a number no parser takes
      (:mod:`lazyscope.core.numbers`: options, lengths files, the environment), a URL with no
      bucket
3     a run directory problem: exists without --force, being written by another trace,
      corrupt, newer schema, cannot be created, read or written (permissions, read-only file
      system, a full disk, a name too long), stdout cannot be written, an output path that is
      not a regular file; a bucket or storage server that cannot be written, a host part
      another trace writes; a damaged baseline
4     a missing optional dependency (torch_xla, a GPU, a browser ...)
5     the traced scenario or script raised or exited with a non-zero status (``sys.exit(3)``,
      ``os._exit(3)``); the run is kept, status ``failed``; ``lazyscope watch``: the run it
      followed did not end ok (failed, interrupted, or killed without being finalised)
6     the traced program ran out of device memory (XLA ``RESOURCE_EXHAUSTED`` at compile or
      run time, CUDA ``OutOfMemoryError``): one line with the graph's site, its sizes and the
      largest buffers the message lists; the run is kept, status ``failed``
70    an internal error of lazyscope (a bug): one line, the traceback in a crash file
128+N terminated by signal N while tracing (SIGHUP 129, SIGQUIT 131, SIGUSR1 138, SIGUSR2
      140, SIGTERM 143): the run is finalised like Ctrl-C, status ``interrupted``; 134: the
      traced program called ``os.abort()`` (the run is kept, status ``failed``)
130   interrupted (Ctrl-C); the run is kept, status ``interrupted``
141   stdout was closed by its reader (``lazyscope report RUN | head``): nothing more is
      written, no line (the code a shell gives a command killed by SIGPIPE)
====  ====================================================================

Messages are one line whatever they quote: :func:`one_line` escapes control characters
(a newline in a path), writes bytes that are not UTF-8 as ``\\xff`` and cuts what is too long;
:func:`show_path` does the same for a path.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_RUN_DIR = 3
EXIT_MISSING_DEPENDENCY = 4
EXIT_TARGET_FAILED = 5
EXIT_OUT_OF_MEMORY = 6
EXIT_INTERNAL = 70
#: a termination signal N ends a trace with 128 + N
EXIT_SIGNAL_BASE = 128
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: a message longer than this is cut (a 10 MB exception message is not a "line")
MAX_LINE = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printable(text: str) -> str:
    """``text`` with lone surrogates (bytes of a file name that are not UTF-8, as
    ``os.fsdecode`` gives them) written as ``\\xff`` and control characters escaped."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` as one printable line of at most about ``limit`` characters."""
    text = _printable(str(text))
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return text


#: a path longer than this is shown by its two ends
MAX_PATH = 400


def show_path(path: Any) -> str:
    """A path for a message: bytes that are not UTF-8 as ``\\xff``, control characters
    escaped (a newline in a file name does not split the line), a path of thousands of bytes
    shown by its two ends."""
    try:
        text = os.fsdecode(path)
    except TypeError:
        text = str(path)
    text = _printable(text)
    if len(text) > MAX_PATH:
        text = f"{text[:150]}...{text[-200:]} ({len(text)} characters)"
    return text


class LazyscopeError(Exception):
    """Base class: ``str(err)`` is the one line shown to the user.

    What the error line leaves to say is declared here, set where it is known: ``run_dir``, the
    run directory that keeps what was recorded before the error (its report is shown); ``nothing_recorded``,
    lazyscope stopped before the program ran (nothing to show); ``after``, lines printed after
    the error line (what could not be written, a hint)."""

    exit_code = EXIT_USAGE

    def __init__(self, *args: Any, run_dir: str | os.PathLike[str] | None = None,
                 nothing_recorded: bool = False, after: list[str] | None = None) -> None:
        super().__init__(*args)
        self.run_dir = run_dir
        self.nothing_recorded = nothing_recorded
        self.after: list[str] = list(after or [])


class UsageError(LazyscopeError):
    """Bad input on the command line or in the library API."""

    exit_code = EXIT_USAGE


class RunDirError(LazyscopeError):
    """The run directory exists, is corrupt, or was written by a newer lazyscope."""

    exit_code = EXIT_RUN_DIR


class OutputError(RunDirError):
    """An output directory or file cannot be created or written (exit 3)."""

    @classmethod
    def from_os(cls, err: OSError, path: Any, *, steps: int | None = None,
                replacing: bool = False) -> OutputError:
        """One line for an OSError met while creating or writing ``path`` (``replacing``: while
        checking that an old run at ``path`` can be replaced)."""
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            return NoSpaceError.for_path(path, steps)
        filename = err.filename
        if filename is not None and _own_temp(str(filename), str(path)):
            filename = None  # lazyscope's own temporary name for it: the user's path is meant
        where = show_path(filename or path)
        path = show_path(path)
        reason = os_reason(err)
        if replacing:
            text = f"cannot replace {path}: {reason}"
            if str(where) != str(path):
                text += f" ({where})"
            text += "; the old run is left as it was"
            return cls(text)
        text = f"cannot write {where}: {reason}"
        if steps is not None:
            text += f"; {steps} step{'' if steps == 1 else 's'} kept in {path}"
        return cls(text)


def _own_temp(filename: str, path: str) -> bool:
    """``filename`` is a temporary file lazyscope writes ``path`` through (``path.tmp``, or a
    ``.NAME.*.tmp`` beside it)."""
    head, name = os.path.split(path)
    return filename.endswith(".tmp") and (
        filename.startswith(path) or os.path.split(filename)[0] == head
        and os.path.basename(filename).startswith(f".{name}."))


def os_reason(err: OSError) -> str:
    """Why an operating-system call failed, in a few words."""
    return {
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "read-only file system",
        errno.ELOOP: "too many levels of symbolic links",
        errno.ENOTDIR: "a part of the path is not a directory",
        errno.ENAMETOOLONG: "the name is too long",
    }.get(err.errno or 0, err.strerror or str(err))


def cannot_read(err: OSError, path: Any) -> RunDirError:
    """One line for an OSError met while reading a run at ``path`` (exit 3)."""
    return RunDirError(f"cannot read {show_path(err.filename or path)}: {os_reason(err)}")


class NoSpaceError(OutputError):
    """The disk filled while a run was written; what was recorded before is kept (exit 3)."""

    @classmethod
    def for_path(cls, path: Any, steps: int | None) -> NoSpaceError:
        device = _device_of(path)
        kept = f"; {steps} steps kept" if steps is not None else ""
        return cls(f"no space left on {show_path(device)} while writing {show_path(path)}{kept}")


def _device_of(path: Any) -> str:
    """The mount point holding ``path`` (for messages), or the path itself."""
    p = os.path.abspath(str(path))
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        while not os.path.ismount(p):
            p = os.path.dirname(p)
    except OSError:
        pass
    return p


class MissingDependencyError(LazyscopeError):
    """An optional dependency is not installed or a device is not present."""

    exit_code = EXIT_MISSING_DEPENDENCY


class TargetFailed(LazyscopeError):
    """The traced scenario or script raised; everything recorded so far is kept."""

    exit_code = EXIT_TARGET_FAILED


class OutOfDeviceMemory(TargetFailed):
    """The traced program ran out of device memory; everything recorded so far is kept."""

    exit_code = EXIT_OUT_OF_MEMORY


class Interrupted(LazyscopeError):
    """The user pressed Ctrl-C; the run is finalised as ``interrupted``."""

    exit_code = EXIT_INTERRUPTED


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15 (the number for a signal Python has no name for)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Signalled(LazyscopeError):
    """A termination signal (SIGTERM, SIGHUP ...) ended a trace; the run is finalised as
    ``interrupted``; exit 128 + N."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_code = EXIT_SIGNAL_BASE + signum


class BrokenOutput(LazyscopeError):
    """stdout's reader went away (EPIPE): nothing more is written, no line (exit 141)."""

    exit_code = EXIT_BROKEN_PIPE

    def __init__(self) -> None:
        super().__init__("")


class GuardError(LazyscopeError):
    """A rule of :func:`lazyscope.guard` broke at a step barrier: the message is the finding
    (the user's line to change, why, the fix); ``step`` is the step it broke at, ``rules`` the
    rules broken (``max-recompiles`` ...), ``findings`` the report's findings behind them.
    Exit 1, as a violated ``lazyscope check`` rule."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(self, message: str, *, step: int | None = None,
                 rules: tuple[str, ...] = (), findings: tuple[Any, ...] = ()):
        super().__init__(message)
        self.step = step
        self.rules = rules
        self.findings = findings


class InternalError(LazyscopeError):
    """An error of lazyscope itself (a bug): one line, exit 70."""

    exit_code = EXIT_INTERNAL
