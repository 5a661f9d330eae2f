"""What torch_xla reads once per process is set up once per process: one XLA session.

torch_xla reads ``PT_XLA_DEBUG_LEVEL``, ``PT_XLA_DEBUG_FILE`` and ``PT_XLA_DEBUG_MAX_FRAME``
into C++ statics at its first compilation or execution (``debug_util.cpp``), and XLA parses
``XLA_FLAGS`` (``--xla_dump_to``) once; after that, changing them changes nothing in this
process. So the first trace of a process sets them, and:

* the debug file and the HLO dump directory belong to the process, in a private directory
  (``/dev/shm`` when it has room), never to one run: a second trace in the same process reads
  on from where the first stopped, a nested or late one does not take it from another, and a
  program that removes or renames its run directory does not lose it. Each trace copies the
  compilation analyses it read into its own run (``RUN/xla_debug.txt``);
* once torch_xla has read them (the first compilation), ``os.environ`` gets back the values it
  had before the trace, so a child process the program starts (a Python that uses XLA itself)
  neither writes into the run nor inherits lazyscope's settings. ``XLA_METRICS_SAMPLES`` stays:
  torch_xla reads it whenever it creates a metric, and it only shortens the percentile window of
  torch_xla's own metrics report. ``PJRT_DEVICE`` stays too (torch_xla sets it itself);
* a trace that begins after torch_xla compiled without these settings is :attr:`late`: its
  compilations are counted, but torch_xla writes no analysis of them, so their causes and
  sites are unknown, and the run says so.

The private directory is removed at exit by the process that made it (never by a forked
child), and swept by a later trace when a killed process left it behind.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import Any

from lazyscope.backends.xla.debugfile import DebugFileReader
from lazyscope.backends.xla.dump import (
    DUMP_FLAG,
    DUMP_PREFIX,
    OWN_DUMP_ENV,
    dump_dir,
    fast_tmp,
    remove_dump_flag,
    sweep_stale_dump_dirs,
)
from lazyscope.backends.xla.runtime import default_pjrt_device
from lazyscope.store.layout import DEBUG_FILE

#: PT_XLA_DEBUG_LEVEL while tracing (unless higher): 1 analyses compilations, 2 executions too
DEBUG_LEVEL = 2
#: XLA_METRICS_SAMPLES while tracing (unless set): see XlaCollector.prepare_env
METRICS_SAMPLES = 32
#: the formats XLA dumps each module in, in lazyscope's own dump directory
DUMP_FORMATS = ("--xla_dump_hlo_as_text", "--xla_dump_hlo_as_proto")
#: what a session sets for torch_xla and gives back once torch_xla has read it
PRIVATE_ENV = ("PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE", "PT_XLA_DEBUG_MAX_FRAME", "XLA_FLAGS",
               OWN_DUMP_ENV)


def torch_xla_compiled() -> bool:
    """Whether torch_xla has compiled a graph in this process already (it then read its debug
    settings: setting them now changes nothing)."""
    if "torch_xla" not in sys.modules:
        return False
    try:
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        return bool(data) and int(data[0]) > 0
    except Exception:  # noqa: BLE001 - no metric: nothing compiled
        return False


def _remove_own(path: str, pid: int) -> None:
    if os.getpid() == pid:  # never in a forked child: the directory is its parent's
        shutil.rmtree(path, ignore_errors=True)


class XlaSession:
    """The process's XLA set-up (see the module docstring)."""

    def __init__(self, graph_shapes: bool):
        self.pid = os.getpid()
        #: torch_xla compiled before this session could set anything up
        self.late = torch_xla_compiled()
        #: traces started in this process so far
        self.traces = 0
        #: every user graph compiled in this process since the session began (in a trace or
        #: between traces), by torch_xla's graph hash: its payload as it was compiled and the
        #: user frames that compiled it. A later trace that runs one of them without compiling
        #: it (torch_xla's in-process cache) knows what it is
        self.graphs: dict[str, tuple[Any, Any]] = {}
        #: XLA writes no HLO dump in this process: it read XLA_FLAGS (at the runtime's start)
        #: before this session set the dump directory; found at the first compilation
        self.dump_dead = False
        self.saved: dict[str, str | None] = {k: os.environ.get(k) for k in PRIVATE_ENV}
        #: the dump format flags this session added to XLA_FLAGS (taken back with the dump)
        self.dump_words: list[str] = []
        self.restored = False
        base = fast_tmp()
        sweep_stale_dump_dirs(base or tempfile.gettempdir())
        self.scratch = tempfile.mkdtemp(prefix=f"{DUMP_PREFIX}{self.pid}-", dir=base)
        atexit.register(_remove_own, self.scratch, self.pid)
        os.environ.setdefault("PJRT_DEVICE", default_pjrt_device())
        level = os.environ.get("PT_XLA_DEBUG_LEVEL", "")
        if not level.lstrip("-").isdigit() or int(level) < DEBUG_LEVEL:
            os.environ["PT_XLA_DEBUG_LEVEL"] = str(DEBUG_LEVEL)
        self.debug_path = os.path.join(self.scratch, DEBUG_FILE)
        os.environ["PT_XLA_DEBUG_FILE"] = self.debug_path
        os.environ.setdefault("PT_XLA_DEBUG_MAX_FRAME", "64")
        # torch_xla's timing metrics keep their last N samples (default 1024) for the
        # percentiles of metrics_report(), and metric_data() copies all of them into Python
        # tuples at every call: ~80 us per barrier for ExecuteTime alone once 1024 executions
        # ran, more than everything else lazyscope does at a barrier. Counts and totals do not
        # depend on it; only the percentile window of torch_xla's own report does.
        os.environ.setdefault("XLA_METRICS_SAMPLES", str(METRICS_SAMPLES))
        self.dump, self.dump_owned = self._set_up_dump(graph_shapes)
        self.debug = DebugFileReader(self.debug_path)
        if self.late:  # torch_xla read its settings already: give the environment back now
            self.restore_env()

    def _set_up_dump(self, graph_shapes: bool) -> tuple[str | None, bool]:
        """XLA's dump directory: the user's own if ``XLA_FLAGS`` names one, else (with
        ``graph_shapes``) this session's private directory; a process that inherited its
        parent trace's directory (a worker) takes its own."""
        flags = os.environ.get("XLA_FLAGS", "")
        inherited = os.environ.get(OWN_DUMP_ENV)
        if inherited and dump_dir(flags) == inherited and inherited != self.scratch:
            os.environ["XLA_FLAGS"] = flags = remove_dump_flag(flags)
            del os.environ[OWN_DUMP_ENV]
        theirs = dump_dir(flags)
        if theirs is not None:
            return theirs, False
        if not graph_shapes:
            return None, False
        os.environ[OWN_DUMP_ENV] = self.scratch
        # text (the inputs, ops, per-line digests) and proto (each instruction's whole Python
        # stack: hlo.parse_stacks); naming one format turns XLA's default text off
        have = flags.split()
        self.dump_words = [w for w in DUMP_FORMATS if w not in have]
        os.environ["XLA_FLAGS"] = " ".join(filter(None, [flags, f"{DUMP_FLAG}={self.scratch}",
                                                         *self.dump_words]))
        return self.scratch, True

    def restore_env(self) -> None:
        """Give ``os.environ`` back the values it had before the session (see the module
        docstring); once."""
        if self.restored:
            return
        self.restored = True
        for key, value in self.saved.items():
            if key == "XLA_FLAGS" and self.dump_owned:
                # torch_xla adds flags of its own at import: take back only the dump directory
                rest = " ".join(w for w in remove_dump_flag(os.environ.get(key, "")).split()
                                if w not in self.dump_words)
                if rest or value is not None:
                    os.environ[key] = rest
                else:
                    os.environ.pop(key, None)
            elif key == "XLA_FLAGS":
                continue  # not ours: left as it is
            elif value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_SESSION: list[XlaSession] = []


def session(graph_shapes: bool) -> XlaSession:
    """This process's session, made by its first trace (a forked child makes its own)."""
    if _SESSION and _SESSION[0].pid == os.getpid():
        return _SESSION[0]
    made = XlaSession(graph_shapes)
    _SESSION[:] = [made]
    return made


def current() -> Any:
    """This process's session, or None before its first trace."""
    return _SESSION[0] if _SESSION and _SESSION[0].pid == os.getpid() else None
