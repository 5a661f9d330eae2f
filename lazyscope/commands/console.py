"""What a person at a terminal sees while lazyscope works, and the report in colour (rich).

* :class:`TraceProgress`: while ``lazyscope trace`` runs, one live line on stderr: the step
  (of the limit, when ``--steps`` is given), steps per second, compilations so far, the last
  step's time and the elapsed time. It is driven by the recorder's step hooks
  (:attr:`lazyscope.backends.base.Recorder.step_hooks`): a hook copies three numbers, rich
  redraws the line from its own thread a few times a second.
* :class:`CompareProgress`: while ``lazyscope compare`` runs, a line per policy (its steps, read
  from the policy's process through :class:`ProgressPipe`) and the elapsed time.
* :class:`ProgressPipe`: the child's side of that channel: ``steps compilations`` lines written
  to a file descriptor the parent passed (``lazyscope trace --progress-fd N``, hidden).
* :func:`print_report`: the text report with each finding coloured by its kind and the verdict
  by the run's health.

When does it show: the live lines only when their stream (the terminal's file descriptor 2) is a
terminal, ``TERM`` is not ``dumb``, ``--quiet`` is not given and the process is not one rank of a
launcher; colour only when standard output is a terminal and neither ``NO_COLOR`` nor
``--quiet`` is set. Piped output is the plain text, byte for byte; ``--format json`` never
carries any of it.

The traced program runs in this process (``runpy``) and owns ``sys.stdout`` / ``sys.stderr``: the
live line never wraps or replaces them (rich's stream redirection is off), and writes to a
duplicate of the terminal's descriptor of its own, so a program that closes or replaces its
streams, or asks whether they are terminals, sees exactly what it would see untraced. What the
program prints while the line is up appears above or beside it, as with tqdm.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

#: colours of the finding kinds (the tag and the header line of each finding)
KIND_STYLES = {
    "recompile": "bold red",
    "sync": "bold yellow",
    "fallback": "bold magenta",
    "graph_break": "bold cyan",
    "eager_fallback": "bold blue",
}
_FINDING = re.compile(r"^\s+\d+\. \[(?P<kind>[a-z_]+)\] ")
_FIX = re.compile(r"^\s+fix: ")
_VERDICT = "verdict: "


def is_terminal(fd: int) -> bool:
    """Whether descriptor ``fd`` is a terminal that understands control codes."""
    try:
        return os.isatty(fd) and os.environ.get("TERM") != "dumb"
    except OSError:  # a closed descriptor
        return False


def live_wanted(quiet: bool = False, *, launched: bool = False) -> bool:
    """Whether a live progress line goes to stderr (see the module docstring)."""
    return not quiet and not launched and is_terminal(2)


def colour_wanted(quiet: bool = False) -> bool:
    """Whether the report on stdout is coloured (see the module docstring)."""
    return not quiet and not os.environ.get("NO_COLOR") and is_terminal(1)


def _own_stderr() -> IO[str]:
    """A file of our own on the terminal that fd 2 is now (the program may close its own)."""
    return os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")


def _fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"


class _LiveLines:
    """Live lines drawn by a rich ``Progress`` on a stderr of its own, with rich's stream
    redirection off (see the module docstring); stopped, and its file closed, on exit."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._file: IO[str] | None = None

    def _start(self, *columns: Any, **options: Any) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self._file = _own_stderr()
        self._progress = Progress(*columns, console=Console(file=self._file, highlight=False),
                                  redirect_stdout=False, redirect_stderr=False,
                                  refresh_per_second=4, **options)
        self._progress.start()

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._file is not None:
            self._file.close()
            self._file = None


class TraceProgress(_LiveLines):
    """The live line of ``lazyscope trace`` (see the module docstring). A context manager:
    nothing is drawn unless ``enabled``; :meth:`attach` is given the run's recorder once the
    trace has started."""

    def __init__(self, limit: int | None, *, enabled: bool):
        super().__init__()
        self.limit = limit
        self.enabled = enabled
        self._task: Any = None
        self._recorder: Any = None

    def __enter__(self) -> TraceProgress:
        if not self.enabled:
            return self
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn

        # fits 80 columns: step 12/100 ━━━━━━━━━━ 4.1 steps/s · 3 compiles · last 245 ms 0:00:03
        columns: list[Any] = [SpinnerColumn(), TextColumn("[bold]{task.fields[step]}")]
        if self.limit is not None:
            columns.append(BarColumn(bar_width=10))
        columns += [TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
        self._start(*columns, speed_estimate_period=10)
        self._task = self._progress.add_task("trace", total=self.limit, **self._fields(0))
        return self

    def _fields(self, steps: int, compiles: int = 0, last: float | None = None,
                rate: float | None = None) -> dict[str, str]:
        step, info = progress_parts(steps, self.limit, compiles, last, rate)
        return {"step": step, "info": info}

    def attach(self, recorder: Any) -> None:
        """Follow ``recorder``'s steps (a step hook)."""
        if self._progress is None:
            return
        self._recorder = recorder
        recorder.step_hooks.append(self._on_step)

    def above(self, text: str) -> bool:
        """Print ``text`` above the live line (True), or nothing when no line is drawn."""
        if self._progress is None:
            return False
        self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        return True

    def _on_step(self, index: int) -> None:
        recorder = self._recorder
        self.show(index, recorder.compiles, recorder.last_wall_s)

    def show(self, steps: int, compiles: int, last: float | None,
             rate: float | None = None) -> None:
        """Redraw the line: ``steps`` done, ``compiles`` so far, the ``last`` step's seconds,
        ``rate`` steps per second (None: rich's own estimate from the updates)."""
        if self._progress is None:
            return
        speed = rate if rate is not None else self._progress.tasks[0].speed
        self._progress.update(self._task, completed=steps, **self._fields(
            steps, compiles, last, speed))


def progress_parts(steps: int, limit: int | None, compiles: int, last: float | None,
                   rate: float | None) -> tuple[str, str]:
    """The live line's two texts: ``step 12/100`` and ``4.1 steps/s · 3 compiles · last 245
    ms`` (``lazyscope watch`` prints them as a plain line when not on a terminal)."""
    of = f"/{limit}" if limit is not None else ""
    info = ["starting" if not steps else "" if rate is None else f"{rate:.1f} steps/s",
            f"{compiles} compile{'s' if compiles != 1 else ''}"]
    if last is not None:
        info.append(f"last {_fmt_ms(last)}")
    return f"step {steps}{of}", " · ".join(i for i in info if i)


@dataclass
class CaseUpdate:
    """What ``lazyscope compare`` says about one case (a policy, or backend x policy) as it
    runs: ``state`` is ``running`` (``steps`` and ``compiles`` so far), ``done`` or
    ``failed`` (``line`` then says how it went), ``note`` (``line``: about the comparison,
    its estimate of the time it takes) or ``eta`` (``line``: the time left, on the live line
    only)."""

    index: int
    total: int
    name: str
    state: str
    steps: int = 0
    compiles: int = 0
    line: str = ""


class CompareProgress(_LiveLines):
    """The live lines of ``lazyscope compare``: one per case and the elapsed time; finished
    cases print their one-line summary above. Without a terminal (``enabled`` False) only the
    summaries are printed, through ``echo``; with one, through ``echo`` too when
    ``echo_when_live`` (``echo`` writes elsewhere than the terminal: stdout piped to a file)."""

    def __init__(self, title: str, steps: int, *, enabled: bool,
                 echo: Callable[[str], None], echo_when_live: bool = False):
        super().__init__()
        self.title = title
        self.steps = steps
        self.enabled = enabled
        self.echo = echo
        self.echo_when_live = echo_when_live
        self._tasks: dict[int, Any] = {}
        self._overall: Any = None

    def __enter__(self) -> CompareProgress:
        if not self.enabled:
            return self
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._start(SpinnerColumn(), TextColumn("{task.description:<16}"),
                    BarColumn(bar_width=24), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn())
        return self

    def update(self, event: CaseUpdate) -> None:
        """Show one case's progress; print its summary when it ends (and a ``note``: the
        comparison's estimate)."""
        if self._progress is None:
            if event.state not in ("running", "eta"):
                self.echo(event.line)
            return
        if event.state == "note":
            self._progress.console.print(event.line, markup=False, highlight=False,
                                         soft_wrap=True)
            if self.echo_when_live:
                self.echo(event.line)
            return
        if event.state == "eta":  # the live line only
            if self._overall is not None:
                self._progress.update(self._overall, info=event.line)
            return
        if self._overall is None:
            self._overall = self._progress.add_task(self.title, total=event.total,
                                                    info="done")
        task = self._tasks.get(event.index)
        if task is None:
            task = self._progress.add_task(event.name, total=self.steps, info="starting")
            self._tasks[event.index] = task
        if event.state == "running":
            self._progress.update(task, completed=event.steps,
                                  info=f"{event.compiles} compile"
                                  f"{'s' if event.compiles != 1 else ''}")
            return
        self._progress.update(task, completed=event.steps if event.state == "done" else None,
                              info="done" if event.state == "done" else "FAILED")
        self._progress.stop_task(task)
        self._progress.advance(self._overall)
        if event.index == event.total:
            self._progress.update(self._overall, info="done")
        self._progress.console.print(event.line, markup=False, highlight=False,
                                     soft_wrap=True)
        if self.echo_when_live:
            self.echo(event.line)


class ProgressPipe:
    """The child's end of ``compare``'s progress channel: after each step, ``"<steps>
    <compilations>\\n"`` on file descriptor ``fd`` (at most every ``every`` seconds, and the
    last one always, from :meth:`close`). A reader that went away silences it; the program
    never notices."""

    def __init__(self, fd: int, every: float = 0.2):
        self.fd = fd
        self.every = every
        self._recorder: Any = None
        self._t = -math.inf  # the first step is always sent
        self._sent = -1

    def attach(self, recorder: Any) -> None:
        self._recorder = recorder
        recorder.step_hooks.append(self._on_step)

    def _send(self, steps: int) -> None:
        if self.fd < 0 or self._recorder is None:
            return
        try:
            os.write(self.fd, f"{steps} {self._recorder.compiles}\n".encode())
            self._sent = steps
        except OSError:  # the reader is gone (or the descriptor was never ours)
            self.fd = -1

    def _on_step(self, index: int) -> None:
        now = time.monotonic()
        if now - self._t >= self.every:
            self._t = now
            self._send(index)

    def close(self) -> None:
        if self._recorder is not None and self._recorder.steps != self._sent:
            self._send(self._recorder.steps)
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def read_progress(line: str) -> tuple[int, int] | None:
    """``(steps, compilations)`` from one line of a :class:`ProgressPipe`; None if malformed."""
    parts = line.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def print_report(text: str, *, clean: bool, colour: bool, echo: Callable[[str], None]) -> None:
    """Print a text report exactly as ``text`` (``echo`` adds nothing): plain, or
    (``colour``) with each finding's header line in its kind's colour, ``fix:`` lines green
    and the verdict green (clean) or yellow."""
    if not colour:
        echo(text)
        return
    from rich.console import Console
    from rich.text import Text

    out = Text()
    for line in text.splitlines(keepends=True):
        style = ""
        found = _FINDING.match(line)
        if found:
            style = KIND_STYLES.get(found.group("kind"), "bold")
        elif _FIX.match(line):
            style = "green"
        elif line.startswith(_VERDICT):
            style = "bold green" if clean else "bold yellow"
        out.append(line, style=style)
    Console(soft_wrap=True, highlight=False, emoji=False, markup=False).print(out, end="")
