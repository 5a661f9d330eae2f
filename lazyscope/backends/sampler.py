"""Where the program's thread spends its time, sampled: a daemon thread that looks at the step
thread's Python stack every :data:`INTERVAL_S` (``sys._current_frames``, the way py-spy and
pyinstrument sample), and counts each sample by the step's part it falls in and by the innermost
line of the user's own code on the stack.

The part comes from the stack itself: lazyscope's wrappers around the DataLoader's
``__next__`` (``input``), the step barrier (``barrier``) and host reads (``sync``) register
their code objects with :func:`mark`; a sample below none of them is the program's own host
work (``host``: on XLA, tracing). So a slow ``Dataset.__getitem__`` under a loader without
workers shows as ``input`` samples at the ``__getitem__`` line, and a model whose graph takes
long to build as ``host`` samples at its ``forward`` lines.

Samples start once the first step ended (before it: the program's start). Cost: one sample
reads one thread's frames and walks at most :data:`MAX_DEPTH` of them (8-30 microseconds at a
depth of 10-90), but to do it this thread takes the GIL from the program's thread, and that
handoff (two context switches, and the program's caches) is what the program pays: about 100
microseconds a sample with both threads on one core, measured. So the rate is 20 a second by
default (0.2% of the program's time at that price; py-spy's 100 a second is free only because
py-spy reads the stack from another process), ``LAZYSCOPE_SAMPLE_HZ`` to change, 0 to turn it
off. A one-second step is 20 samples, ten steps of 80 ms waiting for data 16. Nothing is
written while the program runs: :meth:`Sampler.info` is the run's ``samples`` info at the
end.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections import Counter
from types import CodeType
from typing import Any

from lazyscope.model.ownership import is_library_file, is_own_file

#: seconds between samples (LAZYSCOPE_SAMPLE_HZ overrides the rate)
INTERVAL_S = 0.05
#: frames looked at per sample, innermost first
MAX_DEPTH = 96
#: lines kept in the run's info (the most sampled)
MAX_LINES = 200
#: the run info key
SAMPLES = "samples"

#: code object -> the step part a sample inside it is in
_PHASES: dict[CodeType, str] = {}


def mark(fn: Any, phase: str) -> Any:
    """Samples taken while ``fn`` (a wrapper of lazyscope's) runs are in ``phase``; returns
    ``fn``."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        _PHASES[code] = phase
    return fn


def sample_rate() -> float:
    """Samples a second: ``LAZYSCOPE_SAMPLE_HZ`` (0 turns the sampler off), else 20."""
    text = os.environ.get("LAZYSCOPE_SAMPLE_HZ", "").strip()
    if not text:
        return 1.0 / INTERVAL_S
    try:
        rate = float(text)
    except ValueError:
        return 1.0 / INTERVAL_S
    return rate if 0 <= rate <= 10_000 else 1.0 / INTERVAL_S


class Sampler:
    """Samples the thread ``thread()`` returns (the recorder's step thread) until stopped."""

    def __init__(self, thread: Any, rate: float | None = None,
                 counting: Any = None):
        self._thread = thread
        #: whether a sample now counts (the runner: once the program's first step ended; what
        #: runs before it is the program's start, imports and model building)
        self._counting = counting or (lambda: True)
        self.rate = sample_rate() if rate is None else rate
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.phases: Counter[str] = Counter()
        self.lines: Counter[tuple[str, str, int, str, str]] = Counter()
        #: code object -> whether it is the user's (not a library's, not lazyscope's)
        self._user: dict[CodeType, bool] = {}

    def start(self) -> None:
        if self.rate <= 0 or self._worker is not None:
            return
        self._worker = threading.Thread(target=self._run, name="lazyscope-sampler", daemon=True)
        self._worker.start()

    def stop(self) -> None:
        self._stop.set()
        worker, self._worker = self._worker, None
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=1.0)

    def _run(self) -> None:
        interval = 1.0 / self.rate
        while not self._stop.wait(interval):
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - a sample lost is no reason to stop sampling
                pass

    def _sample(self) -> None:
        """One sample. No frame outlives :func:`_stack`: a frame held while the program runs
        on would keep its locals alive, and on XLA a tensor kept alive is one more output of
        the next graph (a different graph: a compilation the program never made; seen as 2-6
        compilations of a loop that compiles 2 when a frame was held across the wait)."""
        if not self._counting():
            return
        stack = _stack(self._thread())
        if stack:
            self._take(stack)

    def _is_user(self, code: CodeType) -> bool:
        known = self._user.get(code)
        if known is None:
            file = code.co_filename
            known = self._user[code] = not (is_library_file(file) or is_own_file(file)
                                            or file.startswith("<"))
        return known

    def _take(self, stack: list[tuple[CodeType, int]]) -> None:
        phase = None
        user = None
        inner: Any = None  # the code the innermost user frame called (a library's)
        for code, line in stack:
            if phase is None:
                phase = _PHASES.get(code)
            if user is None:
                if self._is_user(code):
                    user = (code.co_filename, line, code.co_name,
                            _callee(inner) if inner is not None else "")
                else:
                    inner = code
            if phase is not None and user is not None:
                break
        phase = phase or "host"
        with self._lock:
            self.phases[phase] += 1
            if user is not None:
                self.lines[(phase, *user)] += 1

    def info(self) -> dict[str, Any] | None:
        """The run's ``samples`` info: the rate, samples per part, and the most sampled user
        lines ``[part, file, line, function, samples, callee]`` (``callee``: the library
        function the line was in, ``torch.optim.adamw.step``, or ""); None when nothing was
        sampled."""
        with self._lock:
            phases = dict(self.phases)
            lines = self.lines.most_common(MAX_LINES)
        total = sum(phases.values())
        if not total:
            return None
        return {"hz": self.rate, "total": total, "phases": phases,
                "lines": [[p, f, ln, fn, n, callee] for (p, f, ln, fn, callee), n in lines]}


def _stack(thread: int | None) -> list[tuple[CodeType, int]]:
    """The thread's stack as (code, line) pairs, innermost first, at most :data:`MAX_DEPTH`.

    The frames are held only inside this function, which neither calls what may release the
    GIL (a path's resolution makes system calls that do: the program's thread would run on,
    return from a frame held here, and its locals would stay alive) nor lets a garbage
    collection run finalizers meanwhile."""
    collecting = gc.isenabled()
    gc.disable()
    frame: Any = None
    try:
        frames = sys._current_frames()
        frame = frames.get(thread) if thread is not None else None
        del frames
        stack: list[tuple[CodeType, int]] = []
        while frame is not None and len(stack) < MAX_DEPTH:
            stack.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        return stack
    finally:
        frame = None
        if collecting:
            gc.enable()


def _callee(code: CodeType) -> str:
    """``torch.optim.adamw.step``: the library function a user line called into, by its
    module path (after ``site-packages``) and name; lazyscope's own wrappers are skipped by
    the caller's walk."""
    parts = code.co_filename.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            parts = parts[parts.index(marker) + 1:]
            break
    else:
        parts = parts[-2:]
    module = ".".join(parts).removesuffix(".py")
    return f"{module}.{code.co_name}"
