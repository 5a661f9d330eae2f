"""Run a scenario or a user's script under a backend's collector, writing a run directory.

``Tracer`` is the one mechanism: the CLI's ``trace`` uses it around ``runpy`` and the library API
``lazyscope.trace()`` is the same object used as a context manager around a user's loop.

Order matters: the target and its arguments are validated and the backend's availability checked
before the output directory is touched; the environment the backend needs (``PT_XLA_DEBUG_*``,
``PJRT_DEVICE``) is set before torch_xla is imported; the run's status is written however the
program ends (normally, at the step limit, by an exception, by ``sys.exit``, by Ctrl-C).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from lazyscope.backends import Backend, Recorder, StepLimitReached, get_backend
from lazyscope.backends.base import set_active_recorder
from lazyscope.backends.frames import user_site
from lazyscope.backends.profiling import ProfileWindow
from lazyscope.errors import Interrupted, LazyscopeError, TargetFailed, UsageError
from lazyscope.model import (
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_OK,
    Meta,
    Run,
    RunWriter,
    Site,
    load_run,
    prepare_run_dir,
)

ERROR_FILE = "error.txt"


@dataclass
class Target:
    """What to run: a built-in scenario or a user's script, with its own arguments."""

    kind: str  # "scenario" | "script"
    name: str
    path: Path
    argv: list[str] = field(default_factory=list)


def scenario_names() -> list[str]:
    from scenarios import SCENARIOS

    return sorted(SCENARIOS)


def resolve_target(spec: str, argv: list[str] | tuple[str, ...] = ()) -> Target:
    """A scenario name or a path to a ``.py`` file; UsageError with the choices otherwise."""
    from scenarios import SCENARIOS

    if spec in SCENARIOS:
        return Target("scenario", spec, SCENARIOS[spec].path, list(argv))
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
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read script {spec}: {err}") from None
        return Target("script", spec, path.resolve(), list(argv))
    raise UsageError(
        f"unknown scenario {spec!r}; scenarios: {', '.join(scenario_names())} "
        "(or give the path of a .py script)"
    )


def _load_module_from(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"_lazyscope_scenario_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate_scenario_args(target: Target) -> None:
    """Parse a scenario's arguments now, so a bad value fails before anything is written."""
    if target.kind != "scenario":
        return
    module = _load_module_from(target.path)
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


def _describe_exception(exc: BaseException) -> str:
    """``Type: message (at file:line)`` with the innermost user frame."""
    frames = [
        Site(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)
    ]
    site = user_site(list(reversed(frames)))
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return f"{text} (at {site.file}:{site.line})" if site else text


class Tracer:
    """Collects a run into ``out`` while active. Use as a context manager.

    ``max_steps`` stops the traced program at that many barriers (StepLimitReached, swallowed
    here). On exit the run's status is ``ok``, ``failed`` (an exception; re-raised) or
    ``interrupted`` (KeyboardInterrupt; re-raised).
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        backend: str | Backend = "xla",
        max_steps: int | None = None,
        force: bool = False,
        target: str = "",
        target_kind: str = "api",
        args: list[str] | None = None,
        profile: ProfileWindow | None = None,
    ):
        if max_steps is not None and max_steps < 1:
            raise UsageError(f"steps must be at least 1, got {max_steps}")
        self.out = Path(out)
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.max_steps = max_steps
        self.force = force
        self.meta = Meta(
            target=target,
            target_kind=target_kind,
            args=list(args or []),
            backend=self.backend.name,
            steps_requested=max_steps,
        )
        self.writer: RunWriter | None = None
        self.recorder: Recorder | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.stopped_at_limit = False
        self.exception: BaseException | None = None
        self.profile = profile
        if profile is not None and not self.backend.supports_profile:
            raise UsageError(
                f"--profile is not supported by the {self.backend.name} backend (use --backend xla)"
            )

    def __enter__(self) -> Tracer:
        self.backend.check_available()
        prepare_run_dir(self.out, self.force)
        self.backend.prepare_env(self.out)
        self.meta.versions = {"python": sys.version.split()[0]}
        self.writer = RunWriter(self.out, self.meta)
        self.recorder = Recorder(self.writer, self.max_steps)
        try:
            device, versions = self.backend.describe()
            self.meta.device = device
            self.meta.versions.update(versions)
            self.writer.write_meta()
            self.backend.start(self.recorder)
            if self.profile is not None:
                self.profile.attach(self.backend, self.recorder)
        except BaseException as exc:
            self.writer.finish(STATUS_FAILED, _describe_exception(exc))
            raise
        set_active_recorder(self.recorder)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        set_active_recorder(None)
        assert self.writer is not None
        if self.profile is not None and self.recorder is not None:
            self.profile.close(self.recorder.next_index)
            self.recorder.set_info(profile=self.profile.info())
        stop_error: BaseException | None = None
        try:
            self.backend.stop()
        except BaseException as err:  # noqa: BLE001 - recorded, the run is still finalised
            stop_error = err
        if exc is None or isinstance(exc, StepLimitReached):
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
                self.error = _describe_exception(exc)
                (self.out / ERROR_FILE).write_text(
                    "".join(traceback.format_exception(exc_type, exc, tb)), encoding="utf-8"
                )
        if stop_error is not None and self.status == STATUS_OK:
            self.status = STATUS_FAILED
            self.error = f"lazyscope failed to stop collection: {_describe_exception(stop_error)}"
        self.writer.finish(self.status, self.error)
        return exc is None or isinstance(exc, StepLimitReached)

    def load(self) -> Run:
        """The run as written (after the context has exited)."""
        return load_run(self.out)


def trace_target(
    target: Target,
    out: str | os.PathLike[str],
    *,
    backend: str = "xla",
    steps: int | None = None,
    force: bool = False,
    profile: ProfileWindow | None = None,
    graph_shapes: bool = True,
) -> Run:
    """Run ``target`` under ``backend`` into ``out`` and return the loaded run.

    ``graph_shapes=False`` (XLA) skips XLA's HLO dump of each compiled graph (compile time
    only): recompilations are then not diffed by input shape.

    A scenario gets ``--steps``/``--backend`` passed on; a script is stopped after ``steps``
    barriers. Raises TargetFailed (exit 5) or Interrupted (exit 130) after finalising the run.
    """
    argv = list(target.argv)
    if target.kind == "scenario":
        if steps is not None and "--steps" not in argv:
            argv += ["--steps", str(steps)]
        if "--backend" not in argv:
            argv += ["--backend", backend]
        target = Target(target.kind, target.name, target.path, argv)
        validate_scenario_args(target)
    tracer = Tracer(
        out,
        backend=backend,
        max_steps=steps if target.kind == "script" else None,
        force=force,
        target=target.name if target.kind == "scenario" else str(target.path),
        target_kind=target.kind,
        args=argv,
        profile=profile,
    )
    if target.kind == "scenario" and steps is not None:
        tracer.meta.steps_requested = steps
    if hasattr(tracer.backend, "graph_shapes"):
        tracer.backend.graph_shapes = graph_shapes
        tracer.meta.info["graph_shapes"] = graph_shapes
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(target.path), *argv]
    sys.path.insert(0, str(target.path.parent))
    entered = False
    try:
        with tracer:
            entered = True
            runpy.run_path(str(target.path), run_name="__main__")
    except BaseException as exc:
        if not entered:
            raise  # lazyscope's own set-up failed: nothing of the program ran
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(
                f"interrupted; the run so far is kept in {out} (status interrupted)"
            ) from None
        # SystemExit or an exception of the program: status and traceback are recorded
    finally:
        sys.argv, sys.path = saved_argv, saved_path
    if tracer.status == STATUS_FAILED:
        if isinstance(tracer.exception, LazyscopeError):
            # lazyscope itself refused inside the program (no CUDA device, say): keep its code
            err = type(tracer.exception)(
                f"{tracer.exception}; the run so far is kept in {out} (status failed)"
            )
            raise err
        raise TargetFailed(
            f"{target.name} failed: {tracer.error}; the run so far is kept in {out} (status failed)"
        )
    return tracer.load()
