"""Errors that reach the user as one clear line and a documented exit code.

Every failure lazyscope can foresee raises a subclass of :class:`LazyscopeError`; the CLI's
``main()`` prints ``lazyscope: <message>`` on stderr (no traceback) and returns ``exit_code``.

Exit codes (also in the README):

====  ====================================================================
0     success
1     a ``lazyscope check`` rule was violated (a finding, not an error)
2     bad input: unknown scenario, bad option value, unreadable script
3     a run directory problem: exists without --force, corrupt, newer schema
4     a missing optional dependency (torch_xla, a GPU, a browser ...)
5     the traced scenario or script raised; the run is kept, status ``failed``
130   interrupted (Ctrl-C); the run is kept, status ``interrupted``
====  ====================================================================
"""

from __future__ import annotations

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


class MissingDependencyError(LazyscopeError):
    """An optional dependency is not installed or a device is not present."""

    exit_code = EXIT_MISSING_DEPENDENCY


class TargetFailed(LazyscopeError):
    """The traced scenario or script raised; everything recorded so far is kept."""

    exit_code = EXIT_TARGET_FAILED


class Interrupted(LazyscopeError):
    """The user pressed Ctrl-C; the run is finalised as ``interrupted``."""

    exit_code = EXIT_INTERRUPTED
