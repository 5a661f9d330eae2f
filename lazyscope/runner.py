"""Run a scenario or a user's script under a backend's collector, writing a run directory.

``Tracer`` is the one mechanism: the CLI's ``trace`` uses it around ``runpy`` and the library API
``lazyscope.trace()`` is the same object used as a context manager around a user's loop.

Order matters: the target and its arguments are validated and the backend's availability checked
before the output directory is touched; the environment the backend needs is set before the
backend's heavy imports; nothing touches a device or starts a runtime before the program does
(``xmp.spawn`` and ``use_spmd()`` refuse to run after that); the run's status is written however
the program ends (normally, at the step limit, by an exception, by ``sys.exit``, by Ctrl-C, by a
full disk).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TextIO

import lazyscope_scenarios
from lazyscope.backends import get_collector
from lazyscope.backends.base import (
    ActiveTrace,
    Recorder,
    StepLimitReached,
    TraceAborted,
    TraceOptions,
    set_active,
)
from lazyscope.backends.profiling import ProfileWindow
from lazyscope.errors import (
    Interrupted,
    LazyscopeError,
    NoSpaceError,
    OutputError,
    TargetFailed,
    UsageError,
)
from lazyscope.frames import make_frame, set_user_roots, source_map
from lazyscope.model import (
    SOURCES_KEY,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_NO_SPACE,
    STATUS_OK,
    Meta,
    Run,
    user_site,
)
from lazyscope.store import RunWriter, check_run_dir, load_run, prepare_run_dir, rank_dir

ERROR_FILE = "error.txt"
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
            raise UsageError(f"script {spec} does not exist")
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
    and ``WORLD_SIZE``) started this process as one of several; None otherwise."""
    env = os.environ if env is None else env
    rank, world = env.get("RANK", ""), env.get("WORLD_SIZE", "")
    if not rank.isdigit():
        rank = env.get("LOCAL_RANK", "")
        world = world or env.get("LOCAL_WORLD_SIZE", "")
    if not rank.isdigit():
        return None
    size = int(world) if world.isdigit() else None
    if size is not None and size <= 1:
        return None
    return int(rank), size or 0


def ranked_out(out: str | os.PathLike[str]) -> tuple[Path, int | None, int | None]:
    """The run directory of this process: ``OUT/rank<N>`` under a launcher, else ``OUT``."""
    found = launcher_rank()
    if found is None:
        return Path(out), None, None
    rank, world = found
    return rank_dir(out, rank), rank, world or None


def describe_exception(exc: BaseException) -> str:
    """``Type: message (at file:line)`` with the innermost user frame."""
    frames = [make_frame(f.filename, f.lineno or 0, f.name)
              for f in traceback.extract_tb(exc.__traceback__)]
    site = user_site(tuple(reversed(frames)))
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    text = " ".join(text.split("\n")[-1:]) if "\n" in text else text
    return f"{text} (at {site.file}:{site.line})" if site else text


class Tracer:
    """Collects a run into ``out`` while active. Use as a context manager.

    ``options.max_steps`` stops the traced program at that many barriers (StepLimitReached,
    swallowed here). On exit the run's status is ``ok``, ``failed`` (an exception; re-raised),
    ``interrupted`` (KeyboardInterrupt; re-raised) or ``no_space`` (the disk filled; the
    NoSpaceError is raised, what was recorded is kept).
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
    ):
        self.options = options or TraceOptions()
        if self.options.max_steps is not None and self.options.max_steps < 1:
            raise UsageError(f"steps must be at least 1, got {self.options.max_steps}")
        self.out = Path(out)
        self.collector = get_collector(self.options.backend, self.options)
        self.collector.worker_tracer = Tracer
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
            self.meta.info["graph_shapes"] = self.options.graph_shapes
        self.writer: RunWriter | None = None
        self.recorder: Recorder | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.stopped_at_limit = False
        self.exception: BaseException | None = None
        #: the error that stopped the recording itself (a full disk), raised from __exit__
        self.aborted: BaseException | None = None
        self.profile = profile
        #: called with the recorder once the trace has started (a progress display hooks in)
        self.observers = list(observers or [])
        if profile is not None and not self.collector.supports_profile:
            raise UsageError(
                f"--profile is not supported by the {self.collector.name} backend (use --backend "
                "xla)")

    def __enter__(self) -> Tracer:
        try:
            # the backend is imported (describe) before the run directory is touched: a broken
            # install is one line and no half-made run
            self.collector.check_available()
            check_run_dir(self.out, self.force)  # no side effect, before the slow import
            self.collector.prepare_env(self.out)
            device, versions = self.collector.describe()
            prepare_run_dir(self.out, self.force)
        except LazyscopeError as err:
            err.nothing_recorded = True  # type: ignore[attr-defined]
            raise
        self.meta.versions = {"python": sys.version.split()[0], **versions}
        self.meta.device = device
        self.meta.capabilities = self.collector.capabilities()
        self.writer = RunWriter(self.out, self.meta)
        self.recorder = Recorder(self.writer, self.options.max_steps)
        try:
            self.writer.write_meta()
            self.collector.start(self.recorder)
            if self.profile is not None:
                self.profile.attach(self.collector, self.recorder)
            for observe in self.observers:
                observe(self.recorder)
        except BaseException as exc:
            self.writer.finish(STATUS_FAILED, describe_exception(exc))
            if isinstance(exc, OSError):
                raise OutputError.from_os(exc, self.out) from None
            raise
        set_active(ActiveTrace(self.recorder, self.collector, self.options))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        set_active(None)
        assert self.writer is not None and self.recorder is not None
        if self.profile is not None:
            self.profile.close(self.recorder.next_index)
            self.recorder.set_info(profile=self.profile.info())
        stop_error: BaseException | None = None
        try:
            self.collector.stop()
        except BaseException as err:  # noqa: BLE001 - recorded, the run is still finalised
            stop_error = err
        failed = self.recorder.failed
        if isinstance(exc, TraceAborted):
            failed = exc.error
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
        else:
            self.status = STATUS_FAILED
            if isinstance(exc, SystemExit):
                self.error = f"the program exited with status {exc.code}"
            else:
                self.exception = exc
                self.error = describe_exception(exc)
                try:
                    (self.out / ERROR_FILE).write_text(
                        "".join(traceback.format_exception(exc_type, exc, tb)), encoding="utf-8")
                except OSError:
                    pass
        if stop_error is not None and self.status == STATUS_OK:
            self.status = STATUS_FAILED
            self.error = f"lazyscope failed to stop collection: {describe_exception(stop_error)}"
        try:  # what the user lines said, while they (and a notebook's kernel) are here to ask
            self.writer.meta.info[SOURCES_KEY] = source_map(self.writer.user_files()).to_json()
        except Exception:  # noqa: BLE001 - descriptive only: locations fall back to file:line
            pass
        self.writer.finish(self.status, self.error)
        if failed is not None:
            raise failed
        return exc is None or isinstance(exc, StepLimitReached)

    def load(self) -> Run:
        """The run as written (after the context has exited)."""
        return load_run(self.out)


def api_tracer(out: str | os.PathLike[str], *, options: TraceOptions, force: bool = False,
               target: str = "", target_kind: str = "api") -> Tracer:
    """The Tracer of the library API (``lazyscope.trace()``, the notebook magic, the Trainer
    callback): it writes ``out``, or ``out/rank<N>`` under a launcher that sets ``RANK``."""
    run_dir, rank, world = ranked_out(out)
    return Tracer(run_dir, options=options, force=force, target=target,
                  target_kind=target_kind, rank=rank, world_size=world)
def _usable(stream: TextIO, fd: int) -> TextIO:
    """The stream lazyscope prints the report to once the program is over: the one it had
    before the program ran, or, when the program closed that one, a new one on the same file
    descriptor (Python's standard streams never close their descriptors)."""
    if not getattr(stream, "closed", False):
        return stream
    try:
        return open(fd, "w", buffering=1, encoding=getattr(stream, "encoding", None) or "utf-8",
                    errors="backslashreplace", closefd=False)
    except OSError:
        return open(os.devnull, "w", encoding="utf-8")  # nowhere to print


def trace_target(
    target: Target,
    out: str | os.PathLike[str],
    *,
    options: TraceOptions,
    force: bool = False,
    profile: ProfileWindow | None = None,
    observers: list[Callable[[Recorder], None]] | None = None,
) -> Run:
    """Run ``target`` under the backend of ``options`` into ``out`` and return the loaded run.

    A scenario gets ``--steps``/``--backend`` passed on (when it does not have them); a script
    is stopped after ``options.max_steps`` barriers. ``observers`` are called with the recorder
    once the trace has started (a progress display adds its step hook). Raises TargetFailed
    (exit 5), Interrupted (exit 130) or NoSpaceError (exit 3) after finalising the run.
    """
    argv = list(target.argv)
    steps = options.max_steps
    if target.kind == "scenario":
        if steps is not None and "--steps" not in argv:
            argv += ["--steps", str(steps)]
        if "--backend" not in argv:
            argv += ["--backend", options.backend]
        target = Target(target.kind, target.name, target.path, argv, target.module)
        validate_scenario_args(target)
        options = TraceOptions(**{**options.__dict__, "max_steps": None})
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
    )
    if target.kind == "scenario" and steps is not None:
        tracer.meta.steps_requested = steps
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    saved_streams = sys.stdout, sys.stderr
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
        if not entered or tracer.aborted is not None:
            # lazyscope's own set-up failed (nothing of the program ran), or recording had to
            # stop (a full disk): the run is finalised, the error says so
            raise
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(
                f"interrupted; the run so far is kept in {out} (status interrupted)"
            ) from None
        # SystemExit or an exception of the program: status and traceback are recorded
    finally:
        sys.argv, sys.path = saved_argv, saved_path
        sys.stdout, sys.stderr = (_usable(stream, fd) for stream, fd in zip(saved_streams, (1, 2),
                                                                              strict=True))
    if tracer.status == STATUS_FAILED:
        if isinstance(tracer.exception, LazyscopeError):
            # lazyscope itself refused inside the program (no CUDA device, say): keep its code
            raise type(tracer.exception)(
                f"{tracer.exception}; the run so far is kept in {run_dir} (status failed)")
        raise TargetFailed(
            f"{target.name} failed: {tracer.error}; the run so far is kept in {run_dir} (status "
            "failed)")
    return tracer.load()
