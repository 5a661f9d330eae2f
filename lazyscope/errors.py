"""Errors that reach the user as one clear line and a documented exit code.

Every failure lazyscope can foresee raises a subclass of :class:`LazyscopeError`; the CLI's
``main()`` prints ``lazyscope: <message>`` on stderr (no traceback) and returns ``exit_code``.

Exit codes (also in docs/faults.md):

====  ====================================================================
0     success
1     a ``lazyscope check`` rule was violated (a finding, not an error)
2     bad input: unknown scenario, bad option value, unreadable script
3     a run directory problem: exists without --force, corrupt, newer schema, cannot be
      created or written (permissions, read-only file system, a full disk)
4     a missing optional dependency (torch_xla, a GPU, a browser ...)
5     the traced scenario or script raised; the run is kept, status ``failed``
130   interrupted (Ctrl-C); the run is kept, status ``interrupted``
====  ====================================================================
"""

from __future__ import annotations

import errno
import os
from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_RUN_DIR = 3
EXIT_MISSING_DEPENDENCY = 4
EXIT_TARGET_FAILED = 5
EXIT_INTERRUPTED = 130


class LazyscopeError(Exception):
    """Base class: ``str(err)`` is the one line shown to the user."""

    exit_code = EXIT_USAGE


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
        where = err.filename or path
        reason = {
            errno.EACCES: "permission denied",
            errno.EPERM: "operation not permitted",
            errno.EROFS: "read-only file system",
            errno.ELOOP: "too many levels of symbolic links",
            errno.ENOTDIR: "a part of the path is not a directory",
            errno.ENAMETOOLONG: "the name is too long",
        }.get(err.errno or 0, err.strerror or str(err))
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


class NoSpaceError(OutputError):
    """The disk filled while a run was written; what was recorded before is kept (exit 3)."""

    @classmethod
    def for_path(cls, path: Any, steps: int | None) -> NoSpaceError:
        device = _device_of(path)
        kept = f"; {steps} steps kept" if steps is not None else ""
        return cls(f"no space left on {device} while writing {path}{kept}")


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


class Interrupted(LazyscopeError):
    """The user pressed Ctrl-C; the run is finalised as ``interrupted``."""

    exit_code = EXIT_INTERRUPTED
