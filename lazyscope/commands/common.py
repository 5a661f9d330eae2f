"""What the commands share: how a line that runs a program is parsed, where a run goes by
default, warnings on stderr, and a run's report built once with its views written."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lazyscope.analyze.hosts import build_any
from lazyscope.core import streams
from lazyscope.core.errors import RunDirError, UsageError, one_line, show_path
from lazyscope.core.numbers import BadNumber, parse_float, parse_int
from lazyscope.model import PodRun
from lazyscope.model.source_files import SOURCES
from lazyscope.store import load_target

if TYPE_CHECKING:
    from lazyscope.backends.runner import Target

CONTEXT = {"help_option_names": ["-h", "--help"]}

#: the URL each local copy of a run at a URL was downloaded from (its name in reports)
URLS: dict[Path, str] = {}


def run_path(target: str | os.PathLike[str]) -> Path:
    """A run as the user named it: a local path, a ``file://`` URL, or a URL of another
    filesystem, downloaded (what changed since the last time) into lazyscope's cache, whose
    local copy is returned (``store.remote``)."""
    from lazyscope.store.remote import download, is_remote, local_path

    text = os.fspath(target)
    if is_remote(text):
        path = download(text)
        URLS[path] = text.rstrip("/")
        return path
    return local_path(text)


class RunArg(click.ParamType):
    """A command's run argument: a local path or a URL (see :func:`run_path`)."""

    name = "run"

    def convert(self, value: Any, param: Any, ctx: Any) -> Path:
        if isinstance(value, Path):
            return value
        return run_path(str(value))


RUN = RunArg()


class LocalPath(click.ParamType):
    """A path lazyscope writes or reads on this machine (``compare --out``, ``export --out``,
    ``advise --lengths``): a ``file://`` URL is its path; a URL of another filesystem is
    refused before anything runs (it would be a local ``./gs:/...`` directory)."""

    name = "path"

    def __init__(self, what: str):
        self.what = what

    def convert(self, value: Any, param: Any, ctx: Any) -> Path:
        from lazyscope.store.remote import is_remote, local_path

        if isinstance(value, Path):
            return value
        if is_remote(str(value)):
            self.fail(f"{one_line(str(value))} is a URL: {self.what} is a path on this machine",
                      param, ctx)
        return local_path(str(value))


class Whole(click.ParamType):
    """A click option's whole number through :func:`~lazyscope.core.numbers.parse_int`."""

    name = "integer"

    def __init__(self, minimum: int | None = None, maximum: int | None = None):
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        try:
            return parse_int(str(value), minimum=self.minimum, maximum=self.maximum)
        except BadNumber as err:
            self.fail(str(err), param, ctx)


class Real(click.ParamType):
    """A click option's finite number through :func:`~lazyscope.core.numbers.parse_float`."""

    name = "number"

    def __init__(self, minimum: float | None = None, maximum: float | None = None, *,
                 above: float | None = None, infinite: bool = False):
        self.minimum = minimum
        self.maximum = maximum
        self.above = above
        self.infinite = infinite

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            return parse_float(str(value), minimum=self.minimum, maximum=self.maximum,
                               above=self.above, infinite=self.infinite)
        except BadNumber as err:
            self.fail(str(err), param, ctx)


def hosts_option(command: Any) -> Any:
    """``--hosts N``: how many hosts a pod is expected to have (a decorator)."""
    return click.option(
        "--hosts", type=Whole(minimum=1), default=None, metavar="N",
        help="a pod (a run at a URL) is expected to have N hosts: one that wrote nothing is "
             "missing (default: what the hosts' launcher said, TPU_WORKER_HOSTNAMES or "
             "torchrun's nodes, and the highest host in the bucket)")(command)


#: how a command that runs a program parses its line: lazyscope's options, then the target;
#: everything after the target is the program's, untouched (as python, pyinstrument and py-spy)
PROGRAM_LINE = {**CONTEXT, "allow_interspersed_args": False}


def default_out(name: str) -> Path:
    """``runs/NAME-TIMESTAMP``; under a launcher, one directory shared by all ranks (named by
    the launcher's run id, else the minute). Without a launcher it is created exclusively
    (``-2`` ... when a trace started in the same second took it: see ``Tracer``)."""
    from lazyscope.backends.runner import launcher_rank

    stem = Path(name).stem if name.endswith(".py") else name
    if launcher_rank() is not None:
        stamp = os.environ.get("TORCHELASTIC_RUN_ID") or _dt.datetime.now().strftime(
            "%Y%m%d-%H%M")
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stem}-{stamp}"


def user_named(text: str) -> str:
    """``text`` with each local copy of a run at a URL named by its URL: a message about a
    downloaded run names what the user gave (``gs://b/r/host0/meta.json``), never lazyscope's
    download cache."""
    for path, url in URLS.items():
        text = text.replace(str(path), url)
    return text


def warn(lines: list[str]) -> None:
    for line in lines:
        streams.echo(f"lazyscope: warning: {one_line(user_named(line))}", to_err=True)


def report_and_views(run_dir: Path, *, warmup_steps: int | None = None,
                      views: bool = True, need_html: bool = False,
                      warnings: list[str] | None = None, hosts: int | None = None) -> Any:
    """Load a run (or a multi-process run), build its report once, write its views (their
    warnings printed, or appended to ``warnings`` when given). A run a live trace is still
    writing gets the report so far and no views: asked for the HTML report, RunDirError.
    ``hosts``: how many hosts a pod is expected to have (``--hosts N``; a usage error for
    anything but a pod)."""

    plotter = None
    if views:  # matplotlib is imported in a plotter process while the run is read
        from lazyscope.render.plotter import Plotter

        plotter = Plotter.start()
    try:
        target = load_target(run_dir)
        url = URLS.get(Path(run_dir))
        if url is not None and isinstance(target, PodRun):
            target.name = url
        if hosts is not None and not isinstance(target, PodRun):
            raise UsageError(f"--hosts {hosts}: {url or show_path(run_dir)} is not a pod (a run "
                             "whose hosts wrote their parts to one URL, URL/host<N>/)")
        report = build_any(target, warmup_steps=warmup_steps, sources=SOURCES, hosts=hosts)
        if url is not None:
            report.run_dir = url
        writer = report.summary.being_written_by
        if views and need_html and writer is not None:
            raise RunDirError(f"{show_path(run_dir)} is still being written by {writer}: its "
                              "views are written into it when the run ends (then run `lazyscope "
                              f"report {show_path(run_dir)} --format html`); the text and json "
                              "reports give the report so far")
        if views and writer is None:  # never into a run a live trace is writing
            from lazyscope.render.views import write_views

            lines = write_views(report, run_dir, need_html=need_html, plotter=plotter)
            if warnings is None:
                warn(lines)
            else:
                warnings.extend(lines)
    finally:
        if plotter is not None:
            plotter.close()
    return report


def program_args(args: tuple[str, ...]) -> list[str]:
    """The program's arguments as given after the target; a ``--`` right after the target is
    dropped (the way lazyscope used to separate them, still accepted)."""
    out = list(args)
    return out[1:] if out[:1] == ["--"] else out


def misplaced_options(command: click.Command, args: list[str], target: Target) -> list[str]:
    """Options of ``command`` found among the program's arguments (``--out``, ``--steps=3``)
    that a scenario does not define itself (its ``--steps`` is its own)."""
    from lazyscope.backends.runner import scenario_options

    names = {n for p in command.params for n in (*p.opts, *p.secondary_opts) if n.startswith("--")}
    found = [a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in names]
    return [n for n in found if n not in scenario_options(target)] if found else []


def order_hint(command: str, misplaced: list[str], target: str) -> str:
    """What to say when a lazyscope option was written after the target."""
    them = ", ".join(dict.fromkeys(misplaced))
    return (f"{them} after {target} went to {target}, not to lazyscope: lazyscope's options go "
            f"before the target (lazyscope {command} {misplaced[0]} ... {target} ...)")


def echo_as_is(text: str) -> None:
    streams.echo(text, nl=False)
