"""The command line: the ``lazyscope`` group and its one error boundary. Each command is a
module of :mod:`lazyscope.commands` (validate -> core call -> render), imported only when it
runs, so a command loads what it uses and nothing else.

``main(argv) -> int`` is the one error boundary: a LazyscopeError or a click usage error becomes
one line on stderr (``lazyscope: ...``) and its exit code (see :mod:`lazyscope.core.errors`); an
OSError nobody foresaw (a path too long to even look at) is a run-directory line (exit 3), and
any other exception of lazyscope's own is "internal error" with its traceback in a crash file
(exit 70), never a traceback on the terminal. Everything lazyscope writes goes through
:mod:`lazyscope.core.streams` (private copies of stdout and stderr taken before the traced program
runs), and termination signals finalise a trace like Ctrl-C (:mod:`lazyscope.core.signals`). In a
forked child of a traced program, main() lets whatever ends the child through untouched.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

import click

from lazyscope.commands import COMMANDS
from lazyscope.commands.common import CONTEXT, user_named, warn
from lazyscope.core import signals, streams
from lazyscope.core.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_RUN_DIR,
    EXIT_SIGNAL_BASE,
    BrokenOutput,
    LazyscopeError,
    RunDirError,
    one_line,
    os_reason,
    show_path,
    signal_name,
)


class _Commands(click.Group):
    """The group, its commands imported when one is run or listed (click's lazy loading)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        import importlib

        module, attr = where.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(package_name="lazyscope", prog_name="lazyscope")
def cli() -> None:
    """lazyscope: find what makes a PyTorch/XLA (or torch.compile) program slow.

    \b
    lazyscope trace [OPTIONS] NAME|SCRIPT.py [ARGS]
                                              run one under instrumentation (lazyscope's
                                              options before the target, the program's after)
    lazyscope report RUN_DIR                  re-render a saved run (text, json, html)
    lazyscope check RUN_DIR [RULES]           a CI gate: exit 1 when a rule breaks
    lazyscope watch RUN_DIR                   follow a run being written: counts, alerts
    lazyscope diff RUN_A RUN_B                what changed from one run to another
    lazyscope export RUN_DIR --format F       perfetto trace, parquet or csv tables
    lazyscope tensorboard RUN_DIR             open its profile and scalars in TensorBoard
    lazyscope compare [OPTIONS] NAME [ARGS]   one scenario under several padding policies
    lazyscope advise RUN_DIR [--emit]         which padding policy wins, and its code
    lazyscope scenarios                       list the built-in workloads

    RUN_DIR may be a URL (gs://bucket/run, s3://..., file://...): a run that every host of a
    pod wrote with `trace --out URL`.
    """
    # a trace of this host killed before its last upload left its part in a spool: it goes
    # to its bucket now (store/remote.py), said in one line
    from lazyscope.store.remote import recover_spools

    recover_spools(lambda line: streams.echo(f"lazyscope: {one_line(line)}", to_err=True))


def _no_such_option(err: click.NoSuchOption) -> str:
    """click's message, and for a command that runs a program, where the program's options go
    (an option meant for the program, written before the target)."""
    command = err.ctx.command.name if err.ctx is not None else ""
    if command not in ("trace", "compare"):
        return err.format_message()
    near = [p for p in (err.possibilities or []) if p not in ("--help", "-h")]
    also = f" (did you mean {', '.join(near)}?)" if near else ""
    what = "SCENARIO" if command == "compare" else "TARGET"
    return (f"no such option {err.option_name}{also}: lazyscope's options go before {what}, "
            f"the program's own after it (lazyscope {command} [OPTIONS] {what} "
            f"{err.option_name} ...)")


def _say(message: str) -> None:
    """The one line of an error, on lazyscope's own stderr (a run at a URL named by its URL,
    not by its local copy)."""
    if message:
        streams.echo(f"lazyscope: {one_line(user_named(message))}", to_err=True)


def _crash_file(exc: BaseException) -> str | None:
    """Write the traceback of an internal error; its path, or None when it cannot be."""
    path = os.path.join(tempfile.gettempdir(), f"lazyscope-crash-{os.getpid()}.txt")
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"lazyscope {' '.join(sys.argv[1:])}\n\n")
            fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except OSError:
        return None
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising (see the module docstring)."""
    pid = os.getpid()
    streams.capture()
    try:
        with signals.handlers(), streams.ours():
            try:
                result = cli.main(args=argv, prog_name="lazyscope", standalone_mode=False)
                streams.flush()
            except BaseException as exc:
                if os.getpid() != pid:
                    raise  # a forked child of the traced program ends as the program's would
                return _exit_code(exc)
    except BaseException:
        if os.getpid() != pid:
            raise
        return EXIT_INTERNAL
    finally:
        if os.getpid() == pid:
            streams.release()
    return result if isinstance(result, int) else 0


def entry() -> int:
    """The ``lazyscope`` command of a process of its own (the console script, ``python -m
    lazyscope``): :func:`main`, with what is alive once the command's modules are imported
    (modules, classes, functions: most of the process's objects) moved out of the cyclic
    garbage collector's reach first (``gc.freeze()``): they live until the process ends, and
    each full collection of a long report would walk them again. Frozen again at the end, so
    the interpreter's last collection at exit skips what the command made (~0.02 s of a
    10^6-step report). Tests call :func:`main`, which freezes nothing."""
    import gc

    gc.freeze()
    code = main()
    gc.freeze()
    return code


def _exit_code(exc: BaseException) -> int:
    """The error boundary: one line on stderr for ``exc``, and the exit code."""
    try:
        raise exc
    except BrokenOutput as err:
        return err.exit_code
    except click.exceptions.Abort as err:
        # click turns Ctrl-C (SIGINT) into Abort: said as trace says it
        _say("interrupted" if isinstance(err.__context__, KeyboardInterrupt) else "aborted")
        return EXIT_INTERRUPTED
    except click.NoSuchOption as err:
        _say(_no_such_option(err))
        return err.exit_code
    except click.exceptions.NoArgsIsHelpError as err:
        # a usage page, not an error: its lines as click wrote them, never folded into one
        streams.echo(err.format_message(), to_err=True)
        return err.exit_code
    except click.ClickException as err:
        _say(err.format_message())
        return err.exit_code
    except click.exceptions.Exit as err:
        return err.exit_code
    except LazyscopeError as err:
        _say(str(err))
        warn(err.after)
        return err.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except signals.Terminated as err:
        _say(f"terminated by {signal_name(err.signum)}")
        return EXIT_SIGNAL_BASE + err.signum
    except OSError as err:  # a path no check could even look at (a name too long ...)
        where = f"{show_path(err.filename)}: " if err.filename else ""
        _say(f"{where}{os_reason(err)}")
        return EXIT_RUN_DIR
    except SystemExit as err:
        code = err.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as err:  # noqa: BLE001 - lazyscope's own bug: one line, never a traceback
        where = _crash_file(err)
        _say(f"internal error: {type(err).__name__}: {err}"
             + (f" (details in {where}; please report it)" if where else ""))
        return EXIT_INTERNAL


__all__ = ["RunDirError", "cli", "main"]

if __name__ == "__main__":
    sys.exit(main())
