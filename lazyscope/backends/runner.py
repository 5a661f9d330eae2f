"""Run a scenario or a user's script under a backend's collector, writing a run directory.

``Tracer`` is the one mechanism: the CLI's ``trace`` uses it around ``runpy`` and the library API
``lazyscope.trace()`` is the same object used as a context manager around a user's loop.

Order matters: the target and its arguments are validated and the backend's availability checked
before the output directory is touched; the environment the backend needs is set before the
backend's heavy imports; nothing touches a device or starts a runtime before the program does
(``xmp.spawn`` and ``use_spmd()`` refuse to run after that); the run's status is written however
the program ends (normally, at the step limit, by an exception, by ``sys.exit``, by Ctrl-C, by a
termination signal the CLI turns into :class:`~lazyscope.core.signals.Terminated`, by ``os._exit``
or ``os.abort()``, by a full disk).

A trace belongs to the process that entered it: in a forked child (``os.fork()``, a
``DataLoader`` worker) ``Tracer.__exit__`` does nothing, so a child that ends normally never
finalises its parent's run. Its run directory is fixed when it starts (an absolute path and a
descriptor: ``os.chdir()`` in the program moves nothing) and locked for as long as it is written.

The Python API says what it cannot observe, in the run's notes (every report shows them): a
trace entered inside another one of the same process records nothing itself (the outer one
records the steps; both runs say so), and entering one trace object twice is a UsageError.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import importlib
import io
import os
import runpy
import stat
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import lazyscope_scenarios
from lazyscope.backends import get_collector
from lazyscope.backends.base import (
    ActiveTrace,
    Recorder,
    StepLimitReached,
    TraceAborted,
    TraceOptions,
    active,
    foreign_options,
    set_active,
)
from lazyscope.backends.hostclock import HOST_CLOCK, HostClock
from lazyscope.backends.loaders import LOADERS, THREAD_ERRORS, LoaderWatch
from lazyscope.backends.profiling import ProfileWindow
from lazyscope.backends.sampler import SAMPLES, Sampler
from lazyscope.core.errors import (
    Interrupted,
    LazyscopeError,
    NoSpaceError,
    OutOfDeviceMemory,
    OutputError,
    RunDirError,
    Signalled,
    TargetFailed,
    UsageError,
    one_line,
    os_reason,
    show_path,
    signal_name,
)
from lazyscope.core.oom import one_line as oom_one_line
from lazyscope.core.oom import parse_out_of_memory
from lazyscope.core.signals import Terminated
from lazyscope.core.units import counted, nbytes
from lazyscope.model import (
    SOURCES_KEY,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_NO_SPACE,
    STATUS_OK,
    Frame,
    Meta,
    Run,
    user_site,
)
from lazyscope.model.info import info_fields
from lazyscope.model.ownership import is_library_file, make_frame, set_user_roots, source_map
from lazyscope.store import RunWriter, check_run_dir, load_run, prepare_run_dir, rank_dir
from lazyscope.store.layout import ERROR_FILE
from lazyscope.store.remote import Uploader, is_remote, local_path
from lazyscope.store.writer import UMASK

SCENARIOS = lazyscope_scenarios.SCENARIOS
SCENARIOS_DIR = lazyscope_scenarios.HERE


@dataclass
class Target:
    """What to run: a built-in scenario (``module``: its importable module) or a user's script,
    with its own arguments."""

    kind: str  # "scenario" | "script"
    name: str
    path: Path
    argv: list[str] = field(default_factory=list)
    module: str = ""

    @property
    def root(self) -> Path:
        """The program's own directory: its files are user code wherever they are installed."""
        if self.kind == "scenario":
            return Path(SCENARIOS_DIR)
        return self.path.parent


def _not_a_file(path: Path) -> str:
    """Why ``path`` is no script to run: what is there instead."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a loop of symbolic links"
        if path.is_symlink():
            return f"is a symbolic link to {show_path(os.readlink(path))}, which does not exist"
        if err.errno == errno.ENOENT:
            return "does not exist"
        return f"cannot be read: {os_reason(err)}"
    if stat.S_ISDIR(mode):
        return "is a directory, not a .py file"
    return "is not a regular file"


def scenario_names() -> list[str]:
    return sorted(SCENARIOS)


def resolve_target(spec: str, argv: list[str] | tuple[str, ...] = ()) -> Target:
    """A scenario name or a path to a ``.py`` file; UsageError with the choices otherwise."""
    if spec in SCENARIOS:
        info = SCENARIOS[spec]
        return Target("scenario", spec, info.path, list(argv), module=info.qualified)
    path = Path(spec)
    if spec.endswith(".py") or os.sep in spec or path.exists():
        if not path.is_file():
            raise UsageError(f"script {show_path(spec)} {_not_a_file(path)}")
        try:
            source = path.read_text(encoding="utf-8")
            compile(source, str(path), "exec")
        except SyntaxError as err:
            raise UsageError(
                f"script {spec} does not parse: line {err.lineno}: {err.msg}"
            ) from None
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise UsageError(f"cannot read script {spec}: {err}") from None
        return Target("script", spec, path.resolve(), list(argv))
    raise UsageError(
        f"unknown scenario {spec!r}; scenarios: {', '.join(scenario_names())} "
        "(or give the path of a .py script)"
    )


def imported_packages(source: str) -> set[str]:
    """The top-level packages a program's source imports (``import torchax.interop`` ->
    ``torchax``), at any depth of its code; empty for source that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.partition(".")[0])
    return out


def default_backend(target: Target) -> str:
    """The backend a trace of ``target`` runs on when ``--backend`` is not given: ``torchax``
    for a script that imports torchax and not torch_xla, else ``xla``."""
    if target.kind != "script":
        return "xla"
    try:
        packages = imported_packages(target.path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return "xla"
    return "torchax" if "torchax" in packages and "torch_xla" not in packages else "xla"


def validate_scenario_args(target: Target) -> None:
    """Parse a scenario's arguments now, so a bad value fails before anything is written.

    The scenario's module is imported for its parser (scenarios run nothing on import); a
    single-file scenario is removed from ``sys.modules`` again, so that running it as
    ``__main__`` next starts from its source."""
    if target.kind != "scenario":
        return
    module = importlib.import_module(target.module)
    if not hasattr(module, "__path__"):
        sys.modules.pop(target.module, None)
    # a scenario's parse_args() also cross-checks arguments; else its parser alone
    parse = getattr(module, "parse_args", None) or module.build_parser().parse_args
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse(target.argv)
    except SystemExit as exc:
        if exc.code in (0, None):
            return
        lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
        message = lines[-1] if lines else "invalid arguments"
        message = message.split("error: ", 1)[-1]
        raise UsageError(f"bad arguments for scenario {target.name}: {message}") from None


def scenario_options(target: Target) -> set[str]:
    """The option strings a scenario's own parser defines (``--steps``, ``--mode`` ...); empty
    for a script (its options are its own business)."""
    if target.kind != "scenario":
        return set()
    module = importlib.import_module(target.module)
    if not hasattr(module, "__path__"):
        sys.modules.pop(target.module, None)
    build = getattr(module, "build_parser", None)
    return set(build()._option_string_actions) if build is not None else set()


def launcher_rank(env: dict[str, str] | None = None) -> tuple[int, int] | None:
    """``(rank, world size)`` when a launcher (torchrun, mpirun-style, any that sets ``RANK``
    and ``WORLD_SIZE``, or ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``) started this process as one
    of several; None otherwise. A rank without a world size above 1 (a scheduler that exports
    ``LOCAL_RANK=0`` for a single process) is not a launch of several."""
    env = os.environ if env is None else env
    rank, world = env.get("RANK", ""), env.get("WORLD_SIZE", "")
    if not rank.isdigit():
        rank = env.get("LOCAL_RANK", "")
        world = world or env.get("LOCAL_WORLD_SIZE", "")
    if not rank.isdigit() or not world.isdigit() or int(world) <= 1:
        return None
    return int(rank), int(world)


def ranked_out(out: str | os.PathLike[str]) -> tuple[Path, int | None, int | None]:
    """The run directory of this process: ``OUT/rank<N>`` under a launcher, else ``OUT``."""
    found = launcher_rank()
    if found is None:
        return Path(out), None, None
    rank, world = found
    return rank_dir(out, rank), rank, world or None


#: the longest exception message kept in a line and in meta.json (error.txt keeps all of it)
MAX_MESSAGE = 400


def raised_at(exc: BaseException) -> Frame | None:
    """The innermost user frame of an exception's traceback: the program's line it raised
    at (None when every frame is library code: lazyscope, torch, site-packages ...)."""
    frames = [make_frame(f.filename, f.lineno or 0, f.name)
              for f in traceback.extract_tb(exc.__traceback__)]
    return user_site(tuple(reversed(frames)))


def describe_exception(exc: BaseException) -> str:
    """``Type: first line of the message (+N more lines) (at file:line)`` with the innermost
    user frame, as one printable line; a message longer than :data:`MAX_MESSAGE` is cut
    (``error.txt`` keeps the whole traceback)."""
    site = raised_at(exc)
    name = type(exc).__qualname__
    module = type(exc).__module__
    if module not in ("builtins", "__main__", None):
        name = f"{module}.{name}"
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - the program's __str__ raised
        message = "<exception str() failed>"
    lines = [ln for ln in message.splitlines() if ln.strip()] or [""]
    first = lines[0].strip()
    if len(first) > MAX_MESSAGE:
        first = (f"{first[:MAX_MESSAGE]}... ({len(message)} characters; the whole message is "
                 f"in {ERROR_FILE})")
    text = f"{name}: {first}" if first else name
    if len(lines) > 1:
        text += f" (+{len(lines) - 1} more line{'s' if len(lines) > 2 else ''})"
    text = one_line(text)
    return f"{text} (at {show_path(site.file)}:{site.line})" if site else text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _free_name(path: Path) -> Path:
    """``path``, or the first of ``path-2``, ``path-3`` ... that does not exist."""
    candidate, n = path, 2
    while os.path.lexists(candidate):
        candidate, n = path.with_name(f"{path.name}-{n}"), n + 1
    return candidate


#: held while a trace is entered (see Tracer.__enter__)
_ENTERING = threading.RLock()
#: the thread that entered each active trace (by its recorder)
_THREADS: weakref.WeakKeyDictionary[Recorder, str] = weakref.WeakKeyDictionary()


class _HardExits:
    """``os._exit`` and ``os.abort`` end the process without unwinding: no ``__exit__``, no
    ``finally``. While a trace is live they are wrapped: the innermost live trace of this
    process is finalised first (``ok`` for ``os._exit(0)``, ``failed`` otherwise), then the
    process ends as the program asked. In any other process (a forked child: a multiprocessing
    worker ends with ``os._exit``) the wrappers call straight through."""

    live: list[Tracer] = []
    real_exit: Any = None
    real_abort: Any = None

    @classmethod
    def enter(cls, tracer: Tracer) -> None:
        if cls.real_exit is None:
            cls.real_exit, cls.real_abort = os._exit, os.abort
            os._exit = _exit_wrapper  # type: ignore[assignment]
            os.abort = _abort_wrapper  # type: ignore[assignment]
        cls.live.append(tracer)

    @classmethod
    def leave(cls, tracer: Tracer) -> None:
        if tracer in cls.live:
            cls.live.remove(tracer)
        if not cls.live and cls.real_exit is not None:
            os._exit, os.abort = cls.real_exit, cls.real_abort  # type: ignore[assignment]
            cls.real_exit = cls.real_abort = None

    @classmethod
    def innermost(cls) -> Tracer | None:
        pid = os.getpid()
        mine = [t for t in cls.live if t.owner_pid == pid]
        return mine[-1] if mine else None


def _exit_wrapper(code: int) -> None:
    tracer = _HardExits.innermost()
    real = _HardExits.real_exit or os._exit
    if tracer is not None:
        code = tracer.ended_by(code, f"the program ended the process with os._exit({code})")
    real(code)


def _abort_wrapper() -> None:
    tracer = _HardExits.innermost()
    real = _HardExits.real_abort or os.abort
    if tracer is not None:
        tracer.ended_by(None, "the program aborted (os.abort(): SIGABRT)")
    real()


class Tracer:
    """Collects a run into ``out`` while active. Use as a context manager.

    ``options.max_steps`` stops the traced program at that many barriers (StepLimitReached,
    swallowed here). On exit the run's status is ``ok``, ``failed`` (an exception; re-raised),
    ``interrupted`` (KeyboardInterrupt or a termination signal; re-raised) or ``no_space``
    (the disk filled; the NoSpaceError is raised, what was recorded is kept).

    ``unique_out``: ``out`` is a default name, created exclusively (``OUT-2`` ... when taken;
    :attr:`out` says which). ``protect``: paths ``--force`` must not delete (the script).
    ``on_hard_exit(code, status)``: called when the program ends the process with
    ``os._exit(code)`` (``code`` None: ``os.abort()``) after the run was finalised; returns the
    exit status to end with (the CLI prints its report or its line there).
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        options: TraceOptions | None = None,
        force: bool = False,
        target: str = "",
        target_kind: str = "api",
        args: list[str] | None = None,
        profile: ProfileWindow | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        observers: list[Callable[[Recorder], None]] | None = None,
        unique_out: bool = False,
        protect: tuple[Path, ...] = (),
        on_hard_exit: Callable[[int | None, str], int | None] | None = None,
        remote: Uploader | None = None,
    ):
        self.options = options or TraceOptions()
        #: a run at a URL: ``out`` is this host's spool, uploaded by ``remote``
        self.remote = remote
        #: why the run's last upload failed (its spool is kept), None when it did not
        self.upload_error: str | None = None
        if str(out) in ("", "."):
            raise RunDirError("the output directory must be a new directory, not the current one")
        if self.options.max_steps is not None and self.options.max_steps < 1:
            raise UsageError(f"steps must be at least 1, got {self.options.max_steps}")
        #: the run directory as given (messages), and absolute (fixed now: a program that
        #: changes its working directory does not move it)
        self.out = Path(out)
        self.path = Path(os.path.abspath(out))
        self.unique_out = unique_out
        self.protect = tuple(protect)
        self.on_hard_exit = on_hard_exit
        self.collector = get_collector(self.options.backend, self.options, worker_tracer=Tracer)
        self.force = force
        self.meta = Meta(
            target=target,
            target_kind=target_kind,
            args=list(args or []),
            backend=self.collector.name,
            steps_requested=self.options.max_steps,
            warmup_steps=self.options.warmup_steps,
            rank=rank,
            world_size=world_size,
        )
        if self.collector.name == "xla":
            self.meta.info.update(info_fields(graph_shapes=self.options.graph_shapes))
        self.writer: RunWriter | None = None
        self.recorder: Recorder | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.stopped_at_limit = False
        self.exception: BaseException | None = None
        #: the program's exception was an out-of-memory error: the one line that says so
        self.out_of_memory: str | None = None
        #: the error that stopped the recording itself (a full disk), raised from __exit__
        self.aborted: BaseException | None = None
        self.profile = profile
        #: called with the recorder once the trace has started (a progress display hooks in)
        self.observers = list(observers or [])
        self.owner_pid = os.getpid()
        #: the run directory of the trace of this process this one was entered inside (it
        #: records nothing itself then)
        self.nested_in: Path | None = None
        self.outer_thread: str | None = None
        self._outer: ActiveTrace | None = None
        self._ending = threading.Lock()
        self._ended = False
        #: where the run directory is at the end, when it was moved while the run was written
        self.moved_to: Path | None = None
        #: the DataLoaders the program iterates: where batch shapes are made
        self._loaders = LoaderWatch()
        #: where the step thread's time goes, sampled (started with the trace)
        self._sampler: Sampler | None = None
        #: the CPU the process used and how busy the machine was, at step barriers
        self._clock = HostClock()
        if profile is not None and not self.collector.supports_profile:
            raise UsageError(
                f"--profile is not supported by the {self.collector.name} backend (use --backend "
                "xla)")

    def _command(self) -> str:
        """What writes the run, for another process's "being written by" message."""
        name = os.path.basename(self.meta.target) if self.meta.target_kind != "scenario" \
            else self.meta.target
        if self.meta.target_kind == "api":
            return f"lazyscope.trace() in {name}"
        return f"lazyscope trace {name}"

    @property
    def foreign(self) -> bool:
        """True in a process other than the one that entered the trace (a forked child)."""
        return os.getpid() != self.owner_pid

    def __enter__(self) -> Tracer:
        try:
            # one thread at a time decides whether a trace of this process is active and
            # becomes it: two traces entered together from two threads never both record
            # (each would see none active; the later one's recorder would get every step)
            with _ENTERING:
                return self._enter()
        except BaseException:
            if self.remote is not None and self.recorder is None:
                self.remote.abandon()  # nothing was recorded: no claim, no spool left behind
            raise

    def _enter(self) -> Tracer:
        if self.writer is not None:
            raise UsageError(
                f"the trace into {show_path(self.out)} was already entered once: a "
                "lazyscope.trace() object cannot be entered again (make a new one)")
        self.owner_pid = os.getpid()
        outer = active()
        if outer is not None and not outer.recorder.forgotten:
            return self._enter_nested(outer)
        try:
            # the backend is imported (describe) before the run directory is touched: a broken
            # install is one line and no half-made run
            self.collector.check_available()
            # no side effect, before the slow import (a default name: the one it would take)
            check_run_dir(_free_name(self.path) if self.unique_out else self.path, self.force,
                          protect=self.protect)
            self.collector.prepare_env(self.path)
            device, versions = self.collector.describe()
            run_dir = prepare_run_dir(self.path, self.force, protect=self.protect,
                                      unique=self.unique_out, command=self._command())
        except LazyscopeError as err:
            err.nothing_recorded = True
            raise
        except OSError as err:  # a path the checks above could not even look at
            error = OutputError.from_os(err, self.out)
            error.nothing_recorded = True
            raise error from None
        if run_dir.path != self.path:  # a default name that was taken: OUT-2 ...
            self.out = self.out.with_name(run_dir.path.name)
            self.path = run_dir.path
        self.meta.versions = {"python": sys.version.split()[0], **versions}
        self.meta.device = device
        self.meta.capabilities = self.collector.capabilities()
        try:
            self.writer = RunWriter(self.path, self.meta, run_dir=run_dir)
        except BaseException as exc:
            run_dir.abandon()  # nothing was recorded: nothing is left behind
            if isinstance(exc, OSError):
                error = OutputError.from_os(exc, self.out)
                error.nothing_recorded = True
                raise error from None
            raise
        self.recorder = Recorder(self.writer, self.options.max_steps)
        try:
            self.writer.write_meta()
            self.collector.start(self.recorder)
            if self.profile is not None:
                self.profile.attach(self.collector, self.recorder)
            for observe in self.observers:
                observe(self.recorder)
            self._clock.attach(self.recorder)  # last: its first sample is the program's start
        except BaseException as exc:
            with contextlib.suppress(Exception):
                self.collector.stop()
            self.writer.finish(STATUS_FAILED, describe_exception(exc))
            if isinstance(exc, OSError):
                raise OutputError.from_os(exc, self.out) from None
            raise
        self._loaders.install()
        recorder = self.recorder
        self._sampler = Sampler(lambda: recorder.step_thread,
                                counting=lambda: recorder.steps > 0)
        self._sampler.start()
        if self.remote is not None:
            self.remote.start()
        set_active(ActiveTrace(self.recorder, self.collector, self.options, self.info_so_far))
        _THREADS[self.recorder] = threading.current_thread().name
        _HardExits.enter(self)
        return self

    def _enter_nested(self, outer: ActiveTrace) -> Tracer:
        """Entered while another trace of this process is active: lazyscope records one trace
        per process at a time, so this one records nothing and both runs say why."""
        self._outer = outer
        self.nested_in = outer.recorder.writer.path
        #: the thread that entered the active trace, when it is not this one
        here = threading.current_thread().name
        self.outer_thread = None if _THREADS.get(outer.recorder, here) == here else \
            _THREADS.get(outer.recorder)
        run_dir = prepare_run_dir(self.path, self.force, protect=self.protect,
                                  unique=self.unique_out, command=self._command())
        self.path, self.out = run_dir.path, self.out.with_name(run_dir.path.name)
        step = outer.recorder.next_index
        self.meta.capabilities.unmeasured = [
            f"everything: this trace was entered inside the trace writing "
            f"{show_path(self.nested_in)} (at its step {step}); lazyscope records one trace per "
            "process at a time, so its steps are recorded there"]
        self.writer = RunWriter(self.path, self.meta, run_dir=run_dir)
        outer.recorder.note(
            f"a nested lazyscope.trace({show_path(self.out)}) was entered at step {step}: its "
            "steps are recorded in this run (one trace per process at a time)")
        return self

    def _exit_nested(self, exc: BaseException | None) -> bool:
        assert self.writer is not None and self._outer is not None
        if exc is None or isinstance(exc, StepLimitReached):
            self.status = STATUS_OK
        elif isinstance(exc, SystemExit) and exc.code in (0, None):
            self.status = STATUS_OK
        elif isinstance(exc, (KeyboardInterrupt, Terminated)):
            self.status, self.error = STATUS_INTERRUPTED, str(exc) or "interrupted"
        else:
            self.status, self.error = STATUS_FAILED, describe_exception(exc)
        self._outer.recorder.note(
            f"the nested lazyscope.trace({show_path(self.out)}) ended at step "
            f"{self._outer.recorder.next_index}")
        self.writer.finish(self.status, self.error)
        return False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self.foreign:
            return False  # a forked child: the run is its parent's
        if self._outer is not None:
            return self._exit_nested(exc)
        with self._ending:
            if self._ended:  # finalised already (os._exit from another thread)
                return False
            self._ended = True
            _HardExits.leave(self)
            return self._finalise(exc_type, exc, tb)

    def _finalise(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                  tb: TracebackType | None) -> bool:
        set_active(None)
        assert self.writer is not None and self.recorder is not None
        stop_error: BaseException | None = None
        if exc is not None and isinstance(exc, Exception):
            with contextlib.suppress(Exception):  # evidence only: the run is finalised anyway
                self.collector.on_program_error(exc)
        try:
            if self.profile is not None:
                self.profile.close(self.recorder.next_index)
                self.recorder.set_run_info(profile=self.profile.info())
            self.collector.stop()
        except BaseException as err:  # noqa: BLE001 - recorded, the run is still finalised
            stop_error = err
        failed = self.recorder.failed
        if isinstance(exc, TraceAborted):
            failed = exc.error
        try:
            self._classify(exc_type, exc, tb, failed, stop_error)
        except Exception as err:  # noqa: BLE001 - lazyscope's own bug: the run still ends
            # how the program ended could not be described: the run's status is still written
            # (never left "running") with what is known
            if self.status in (None, STATUS_OK) or self.error is None:
                self.status = STATUS_FAILED
                self.error = (f"lazyscope could not describe how the program ended "
                              f"({type(err).__name__}: {one_line(str(err), 200)})")
            if exc is not None and not isinstance(exc, (StepLimitReached, SystemExit)):
                self._write_error_file(exc_type, exc, tb)
        try:
            self._finish()
        except LazyscopeError as err:  # the run cannot be finalised (its directory is gone)
            self.aborted = err
            raise
        if failed is not None:
            raise failed
        return exc is None or isinstance(exc, StepLimitReached)

    def _classify(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                  tb: TracebackType | None, failed: BaseException | None,
                  stop_error: BaseException | None) -> None:
        """How the program ended: the run's status and error, its error file and site, what an
        out-of-memory error said. Raises only on a bug of lazyscope's (then the run is still
        finalised, see :meth:`_finalise`)."""
        assert self.writer is not None and self.recorder is not None
        if self.recorder.past_limit:
            self.recorder.note(
                f"the program caught lazyscope's stop at --steps {self.recorder.max_steps} and "
                f"went on: {counted(self.recorder.past_limit, 'later barrier')} not recorded")
        if failed is not None:
            self.exception = self.aborted = failed
            self.status = STATUS_NO_SPACE if isinstance(failed, NoSpaceError) else STATUS_FAILED
            self.error = str(failed)
        elif exc is None or isinstance(exc, StepLimitReached):
            self.stopped_at_limit = isinstance(exc, StepLimitReached)
            self.status = STATUS_OK
        elif isinstance(exc, SystemExit) and exc.code in (0, None):
            self.status = STATUS_OK
        elif isinstance(exc, KeyboardInterrupt):
            self.status = STATUS_INTERRUPTED
            self.error = "interrupted by the user (Ctrl-C)"
        elif isinstance(exc, Terminated):
            self.status = STATUS_INTERRUPTED
            self.error = f"terminated by {signal_name(exc.signum)}"
        else:
            self.status = STATUS_FAILED
            if isinstance(exc, SystemExit):
                self.error = f"the program exited with status {one_line(str(exc.code), 200)}"
            else:
                self.exception = exc
                self._write_error_file(exc_type, exc, tb)
                self.error = describe_exception(exc)
                site = raised_at(exc)
                if site is not None:  # the line a report of the run names for its error
                    self.writer.meta.info.update(info_fields(error_site=site.to_json()))
                try:
                    self._note_out_of_memory(exc)
                except Exception:  # noqa: BLE001 - descriptive: the run fails as any error does
                    self.out_of_memory = None
        if stop_error is not None and self.status == STATUS_OK:
            self.status = STATUS_FAILED
            self.error = f"lazyscope failed to stop collection: {describe_exception(stop_error)}"
        thread_errors = self._loaders.thread_errors
        if thread_errors and self.status == STATUS_OK:
            # the program ended well, but a thread of it died: a loader's thread ends the data,
            # and the loop goes on with nothing (an "ok" run that trained nothing)
            first = thread_errors[0]
            where = f" (at {first['at'][0]}:{first['at'][1]})" if first.get("at") else ""
            self.status = STATUS_FAILED
            self.error = (f"an exception ended the program's thread {first['thread']}: "
                          f"{first['error']}{where}")
            at = first.get("at")
            if at and not is_library_file(at[0]):
                self.writer.meta.info.update(
                    info_fields(error_site=make_frame(*at).to_json()))

    def _write_error_file(self, exc_type: type[BaseException] | None, exc: BaseException,
                          tb: TracebackType | None) -> None:
        """The program's whole traceback in ``RUN/error.txt`` (never raises: the run's status
        matters more)."""
        assert self.writer is not None
        try:
            self.writer.write_text(ERROR_FILE, "".join(
                traceback.format_exception(exc_type, exc, tb)))
        except Exception:  # noqa: BLE001 - the run's status matters more
            pass

    def _note_out_of_memory(self, exc: BaseException) -> None:
        """An out-of-memory error of the program (XLA's RESOURCE_EXHAUSTED, CUDA's
        OutOfMemoryError): parsed into the run's info (``out_of_memory``, which the report
        reads) and the one line the trace ends with, against the last graph compiled."""
        texts = []
        seen: BaseException | None = exc
        while seen is not None and len(texts) < 4:  # "raise ... from" an XLA error
            try:
                texts.append(str(seen))
            except Exception:  # noqa: BLE001 - the program's __str__ raised
                pass
            seen = seen.__cause__ or seen.__context__
        oom = parse_out_of_memory("\n".join(texts))
        if oom is None or self.recorder is None:
            return
        site = raised_at(exc)
        where = f"{site.file}:{site.line}" if site is not None else ""
        graph_site, step, sizes = "", None, None
        last = self.recorder.last_graph
        if last is not None:
            stack, memory, step = last
            at = user_site(stack) if stack else None
            graph_site = f"{at.file}:{at.line}" if at is not None else ""
            sizes = memory.to_json()
        self.out_of_memory = oom_one_line(oom, nbytes, where, graph_site, step, sizes)
        first = next((ln.strip() for ln in texts[0].splitlines() if ln.strip()), "") \
            if texts else ""
        self.recorder.set_run_info(out_of_memory={
            **oom.to_json(), "message": one_line(first, 500),
            "site": [site.file, site.line] if site is not None else None})

    def info_so_far(self) -> dict[str, Any]:
        """The info the run's end will write that the trace holds in memory until then (what
        the loader watch saw of the data loaders), for a report of the run so far (the live
        alerts, the guard): the line that makes a shape is the same mid-run as at the end."""
        info: dict[str, Any] = {HOST_CLOCK: self._clock.info()}
        try:
            loaders = self._loaders.info()
            if loaders:
                info[LOADERS] = loaders
            if self._loaders.thread_errors:
                info[THREAD_ERRORS] = list(self._loaders.thread_errors)
            samples = self._sampler.info() if self._sampler is not None else None
            if samples:
                info[SAMPLES] = samples
        except Exception:  # noqa: BLE001 - descriptive only: shapes are then named where used
            pass
        return info_fields(**info)

    def _finish(self) -> None:
        """Record the end (status, error) and where the run directory is now."""
        assert self.writer is not None and self.status is not None
        self._loaders.remove()
        if self._sampler is not None:
            self._sampler.stop()
        self.writer.meta.info.update(self.info_so_far())
        try:  # what the user lines said, while they (and a notebook's kernel) are here to ask
            self.writer.meta.info[SOURCES_KEY] = source_map(self.writer.user_files()).to_json()
        except Exception:  # noqa: BLE001 - descriptive only: locations fall back to file:line
            pass
        where = self.writer.where()
        self.writer.finish(self.status, self.error)
        if self.remote is not None:
            self.upload_error = self.remote.finish()
        # the same directory reached through a symbolic link was not moved: the user's name
        # for it stays
        if where is not None and os.path.realpath(where) != os.path.realpath(self.path):
            self.moved_to = where
            self.path = where

    def kept_in(self) -> str:
        """Where the run is kept, for the line a trace ends with: its directory; for a run at a
        URL, this host's part there once uploaded (its spool is removed after the report is
        shown), else the spool that keeps it until the next lazyscope command uploads it."""
        if self.remote is None:
            return show_path(self.out)
        spool = self.remote.spool
        part = f"{spool.url}/host{spool.host if spool.host is not None else 0}"
        if self.upload_error is None:
            return part
        return (f"{show_path(spool.path)} (not uploaded to {part}: {self.upload_error}; the next "
                "lazyscope command on this host uploads it)")

    def ended_by(self, code: int | None, why: str) -> int:
        """The program is ending the process without unwinding (``os._exit(code)``; None:
        ``os.abort()``): finalise the run now; the exit status to end with."""
        with self._ending:
            if self._ended:
                return code if code is not None else 134
            self._ended = True
            _HardExits.leave(self)
            set_active(None)
            with contextlib.suppress(BaseException):
                self.collector.stop()
            self.status = STATUS_OK if code == 0 else STATUS_FAILED
            self.error = None if code == 0 else why
            with contextlib.suppress(BaseException):
                self._finish()
        if self.on_hard_exit is not None:
            with contextlib.suppress(BaseException):
                result = self.on_hard_exit(code, self.status)
                if result is not None:
                    return result
        return code if code is not None else 134

    def load(self) -> Run:
        """The run as written (after the context has exited)."""
        return load_run(self.path)


def api_tracer(out: str | os.PathLike[str], *, options: TraceOptions, force: bool = False,
               target: str = "", target_kind: str = "api") -> Tracer:
    """The Tracer of the library API (``lazyscope.trace()``, the notebook magic, the Trainer
    callback): it writes ``out``, or ``out/rank<N>`` under a launcher that sets ``RANK``; a URL
    through this host's spool (:func:`remote_out`)."""
    out, remote = remote_out(out, force)
    with abandoned_on_error(remote):
        run_dir, rank, world = ranked_out(out)
        return Tracer(run_dir, options=options, force=force, target=target,
                      target_kind=target_kind, rank=rank, world_size=world, remote=remote)


@contextlib.contextmanager
def abandoned_on_error(remote: Uploader | None) -> Iterator[None]:
    """A URL's claim and spool, made before the Tracer that uses them, go when making the
    Tracer fails (an option the backend refuses): nothing was recorded."""
    try:
        yield
    except BaseException:
        if remote is not None:
            remote.abandon()
        raise


def remote_out(out: str | os.PathLike[str], force: bool) -> tuple[Path, Uploader | None]:
    """Where this process writes ``out``: a local path as given (``file://`` too), or, for a URL
    of another filesystem, this host's spool, with the uploader that takes it to
    ``URL/host<N>/`` (``backends.hosts``)."""
    if isinstance(out, str) and is_remote(out):
        from lazyscope.backends.hosts import start_part

        uploader = start_part(out, force=force)
        return uploader.spool.part, uploader
    return local_path(out), None


def trace_target(
    target: Target,
    out: str | os.PathLike[str],
    *,
    options: TraceOptions,
    force: bool = False,
    profile: ProfileWindow | None = None,
    observers: list[Callable[[Recorder], None]] | None = None,
    unique_out: bool = False,
    on_hard_exit: Callable[[Tracer, int | None], int | None] | None = None,
) -> Tracer:
    """Run ``target`` under the backend of ``options`` into ``out``; return the finished
    tracer (``tracer.path``: where the run is; ``tracer.load()``: the run).

    A scenario gets ``--steps``/``--backend`` passed on (when it does not have them); a script
    is stopped after ``options.max_steps`` barriers. ``observers`` are called with the recorder
    once the trace has started (a progress display adds its step hook). Raises TargetFailed
    (exit 5), Interrupted (exit 130), Signalled (exit 128 + N) or NoSpaceError (exit 3) after
    finalising the run; the error's ``run_dir`` is where the run is. ``unique_out``: ``out`` is
    a default name (see :class:`Tracer`). In a forked child of the program, whatever ends the
    child propagates unchanged (``SystemExit``, the child's own exception): the run is its
    parent's.
    """
    argv = list(target.argv)
    steps = options.max_steps
    foreign = foreign_options(options)
    if foreign:  # an option the backend would ignore is refused, for every backend the same
        raise UsageError("; ".join(foreign))
    if options.backend == "xla" and target.kind == "script" and not _utf8(str(target.path)):
        # torch_xla's compilation analysis (PT_XLA_DEBUG_LEVEL, which a trace needs) cannot
        # encode such a file name: the program would fail only because it is traced
        raise UsageError(
            f"cannot trace {show_path(target.path)} on XLA: its path is not valid UTF-8, and "
            "torch_xla's compilation analysis fails on such a file name (the program would "
            "fail only because it is traced); rename it, or copy it to a UTF-8 name")
    if target.kind == "scenario":
        if steps is not None and "--steps" not in argv:
            argv += ["--steps", str(steps)]
        if "--backend" not in argv:
            argv += ["--backend", options.backend]
        target = Target(target.kind, target.name, target.path, argv, target.module)
        validate_scenario_args(target)
        options = TraceOptions(**{**options.__dict__, "max_steps": None})
    out, remote = remote_out(out, force)
    with abandoned_on_error(remote):
        run_dir, rank, world = ranked_out(out)
        tracer = Tracer(
            run_dir,
            options=options,
            force=force,
            target=target.name if target.kind == "scenario" else str(target.path),
            target_kind=target.kind,
            args=argv,
            profile=profile,
            rank=rank,
            world_size=world,
            observers=observers,
            unique_out=unique_out and rank is None and remote is None,
            protect=(target.path,) if target.kind == "script" else (),
            remote=remote,
            on_hard_exit=(lambda code, status: on_hard_exit(tracer, code))
            if on_hard_exit is not None else None,
        )
    if target.kind == "scenario" and steps is not None:
        tracer.meta.steps_requested = steps
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(target.path), *argv]
    if target.kind == "script":
        sys.path.insert(0, str(target.path.parent))
    set_user_roots([target.root])
    entered = False
    try:
        with tracer:
            entered = True
            if target.kind == "scenario":  # as `python -m lazyscope_scenarios.NAME`
                runpy.run_module(target.module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(str(target.path), run_name="__main__")
    except BaseException as exc:
        if tracer.foreign:
            raise  # a forked child of the program ends as the program's child would
        if not entered or tracer.aborted is not None:
            # lazyscope's own set-up failed (nothing of the program ran), or recording had to
            # stop (a full disk): the run is finalised, the error says so
            if entered and isinstance(exc, LazyscopeError):
                exc.run_dir = tracer.path
            raise
        kept = tracer.kept_in()
        if isinstance(exc, KeyboardInterrupt):
            err: LazyscopeError = Interrupted(
                f"interrupted; the run so far is kept in {kept} (status interrupted)")
            err.run_dir = tracer.path
            raise err from None
        if isinstance(exc, Terminated):
            err = Signalled(exc.signum, f"terminated by {signal_name(exc.signum)}; the run so "
                            f"far is kept in {kept} (status interrupted)")
            err.run_dir = tracer.path
            raise err from None
        # SystemExit or an exception of the program: status and traceback are recorded
    finally:
        if not tracer.foreign:
            sys.argv, sys.path = saved_argv, saved_path
            # the program is over: lazyscope's own files (views, a report) get the permission
            # bits of the umask it started with, not of one the program set
            os.umask(UMASK)
    if tracer.foreign:
        raise SystemExit(0)  # a forked child that fell off the end of the program
    shown = tracer.kept_in()
    if tracer.status == STATUS_FAILED:
        if isinstance(tracer.exception, LazyscopeError):
            # lazyscope itself refused inside the program (no CUDA device, say): keep its code
            err = type(tracer.exception)(
                f"{tracer.exception}; the run so far is kept in {shown} (status failed)")
        elif tracer.out_of_memory is not None:
            err = OutOfDeviceMemory(
                f"{show_path(target.name)} failed: {tracer.out_of_memory}; the run so far is "
                f"kept in {shown} (status failed)")
        else:
            err = TargetFailed(
                f"{show_path(target.name)} failed: {tracer.error}; the run so far is kept in "
                f"{shown} (status failed)")
        err.run_dir = tracer.path
        raise err
    return tracer
