"""The plots drawn in a second process that imports matplotlib while the run is read.

matplotlib's import (``matplotlib.figure`` and the Agg canvas: ~0.25 s here) is a quarter of an
HTML report of a long run, and it cannot overlap the run's reading and analysis in a thread
(both are Python holding the GIL). So a command that will write the views starts a
:class:`Plotter` first: ``python -m lazyscope.render.plotter`` imports matplotlib and the plot
writers on another core, then reads one request from its stdin: the :class:`PlotData` (the
bucketed series and the titles' numbers: kilobytes, never the run's columns) and the PNG path
of each plot; it draws them and answers ``{name: None | error line}`` on its stdout.

Anything that goes wrong with the process (it cannot start, dies, takes too long, answers
nothing) returns None from :meth:`Plotter.draw`, and the caller draws the plots itself as it
would have without a plotter: a plotter only ever makes the views sooner. A plot the plotter
could not write (a read-only run directory) comes back as its error line.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

#: how long a request may take (start-up included) before the plots are drawn in-process
TIMEOUT_S = 60.0


class Plotter:
    """A started plotter process (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self._proc: subprocess.Popen[bytes] | None = proc
        #: the plots asked for (their file names), once :meth:`submit` sent the request
        self._asked: list[str] | None = None

    @classmethod
    def start(cls) -> Plotter | None:
        """Start a plotter; None when no process can be started here."""
        import lazyscope

        root = str(Path(lazyscope.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [root, os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "lazyscope.render.plotter"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, close_fds=True)
        except OSError:
            return None
        return cls(proc)

    def submit(self, data: Any, paths: dict[str, Path]) -> Plotter:
        """Ask for each plot of ``paths`` (file name -> where) from ``data`` (a PlotData),
        without waiting: :meth:`draw` with the same paths collects the answer."""
        proc = self._proc
        if proc is None or self._asked is not None:
            return self
        self._asked = list(paths)
        try:
            assert proc.stdin is not None
            proc.stdin.write(pickle.dumps((data, {k: str(v) for k, v in paths.items()})))
            proc.stdin.close()
            proc.stdin = None  # sent: communicate() only reads the answer
        except Exception:  # noqa: BLE001 - a dead plotter: draw in-process
            self.close()
        return self

    def draw(self, data: Any, paths: dict[str, Path]) -> dict[str, str | None] | None:
        """Draw each plot of ``paths`` (file name -> where) from ``data`` (a PlotData): {file
        name: None when written, else the error line}; None when the plotter failed (then
        nothing it wrote is to be trusted: the caller draws them all)."""
        self.submit(data, paths)
        if self._proc is None or self._asked != list(paths):
            self.close()
            return None
        proc = self._proc
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
            answer = pickle.loads(out) if proc.returncode == 0 and out else None
        except Exception:  # noqa: BLE001 - any failure: draw in-process instead
            answer = None
        self.close()  # ended, or killed when it failed
        return answer if isinstance(answer, dict) and set(answer) == set(paths) else None

    def close(self) -> None:
        """Stop a plotter that will not be asked for anything (or was answered)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def main() -> int:
    """The plotter process: one request from stdin, read on a thread while matplotlib is
    imported (the request is larger than a pipe's buffer: the caller's write would otherwise
    wait for the imports to end)."""
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(sys.stdin.buffer.read()), daemon=True)
    reader.start()
    from lazyscope.render.plots import PLOTS, import_matplotlib

    import_matplotlib()
    reader.join()
    request = got[0] if got else b""
    if not request:
        return 0  # the caller needed no plots
    data, paths = pickle.loads(request)
    answer: dict[str, str | None] = {}
    for name, path in paths.items():
        try:
            PLOTS[name][1](data, Path(path))
            answer[name] = None
        except OSError as err:
            answer[name] = f"could not write {path}: {err.strerror or err}"
    sys.stdout.buffer.write(pickle.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
