"""Rules applied while the program runs: :func:`lazyscope.guard` and the live alerts of
``lazyscope trace``.

One rule, the final report's: :class:`OnlineCheck` never judges from counters alone. After each
step it looks at what the step recorded (compilations, host syncs, CPU fallbacks, graph breaks:
:attr:`Recorder.last_values` and :attr:`Recorder.last_events`, no I/O). Only when the step did
something a rule is about, and past the warm-up, does it read the run written so far (the run
directory is written as the program goes: the records are in the page cache the moment they are
copied) and build the report of it, with the same analysis and the same rules as ``lazyscope
report`` and ``lazyscope check``. What it says is a finding of that report: the user's line to
change, why, and the fix; so the report at the end never contradicts what was said while the
program ran (it has more steps, never different rules).

A healthy steady step costs a few dictionary reads. A step that triggers a look and finds
nothing new is looked at again at the next barrier (on XLA a graph compiled in a steady step is
recorded there, once the next step has shown which user line made it: so the guard raises at
the barrier after the one that compiled). Host syncs that recur at a site already said are
looked at again only after a quarter of the steps so far, and the looks of the live alerts
together may take at most :data:`LOOK_BUDGET` of the run's time: past it, the next step looks
instead.

:class:`Guard` (``lazyscope.guard(...)``) traces its block like ``lazyscope.trace()`` into a
temporary run directory (removed at the end; ``out=`` keeps it) and raises
:class:`~lazyscope.core.errors.GuardError` at the step barrier where a rule breaks.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

from lazyscope.analyze.check import Rules, Violation, check_report
from lazyscope.analyze.findings import Finding
from lazyscope.analyze.report import Report, build_report
from lazyscope.backends.base import Recorder, TraceOptions, active
from lazyscope.backends.runner import Tracer, api_tracer
from lazyscope.core.errors import GuardError, LazyscopeError, UsageError, one_line
from lazyscope.model import EVENT_KINDS, KIND_CODE, Frame, Run, location
from lazyscope.model.source_files import SOURCES
from lazyscope.render.text import finding_lines
from lazyscope.store import load_run

#: the finding kinds behind each rule of ``lazyscope check`` the guard applies
RULE_KINDS: dict[str, tuple[str, ...]] = {
    "max-recompiles": ("recompile",),
    "max-syncs-per-step": ("sync",),
    "no-fallbacks": ("fallback",),
    "no-graph-breaks": ("graph_break", "eager_fallback"),
    "max-input-share": ("input_bound",),
    "max-tracing-share": ("host_bound",),
}
#: the guard judges the step's time shares every this many steps after its warm-up (and at
#: the block's end)
SHARE_EVERY = 10
#: live alerts: the share of the run's time the looks may take (past it, a look waits for a
#: later step), once they took FREE_LOOKS_S seconds; the guard looks whenever a step asks
LOOK_BUDGET = 0.05
FREE_LOOKS_S = 0.25
#: the finding kinds a live alert speaks of (a site compiling new graphs, a per-step sync site,
#: a fallback, a graph break)
ALERT_KINDS = ("recompile", "sync", "fallback", "graph_break", "eager_fallback")


def _count(value: float | None) -> float:
    """A step value as a count: None and NaN (not measured) are 0."""
    return 0.0 if value is None or math.isnan(value) else float(value)


@dataclass
class Alert:
    """A finding that became true at ``step`` (for the guard: under the rule ``rule``)."""

    step: int
    rule: str
    message: str
    finding: Finding | None
    report: Report
    #: the check's evidence (the sites, the steps), said when no finding stands for the rule
    #: yet (a line that read a value once is not yet a per-step sync site)
    evidence: tuple[str, ...] = ()

    def where(self) -> str:
        f = self.finding
        if f is None or not f.file:
            return "unknown line"
        return location(Frame(f.file, f.line), self.report.sources)

    def line(self) -> str:
        """One line: the step, the line to change, what happens there and the fix."""
        f = self.finding
        if f is None:
            return one_line(f"step {self.step}: {'; '.join([self.message, *self.evidence])}")
        what = "; ".join(f.detail.split("; ")[:2])  # what happened, without the whole story
        return one_line(f"step {self.step}: [{f.kind}] {self.where()}: {what}; fix: {f.fix}",
                        limit=1000)

    def text(self) -> str:
        """The rule broken and the finding as the report shows it (several lines)."""
        head = f"step {self.step}: {self.rule}: {self.message}"
        if self.finding is None:
            return "\n".join([head, *(f"    {e}" for e in self.evidence)])
        return "\n".join([head, *finding_lines(self.finding, self.report.sources)])


class OnlineCheck:
    """Judges a run while it is written (see the module docstring). ``budget``: the share of
    the run's time looks may take (live alerts); None: no limit (the guard).

    ``rules``: the guard's rules (a :class:`~lazyscope.analyze.check.Rules`), each broken rule an
    alert; None: every new finding of the report is one (live alerts). ``warmup_steps``: steps
    before it trigger nothing (None: the analysis finds the warm-up, as ``lazyscope report``
    does)."""

    def __init__(self, rules: Rules | None = None, warmup_steps: int | None = None, *,
                 budget: float | None = None):
        self.rules = rules
        self.budget = budget
        self.warmup_steps = warmup_steps
        #: what was said already: (rule or kind, file, line)
        self.said: set[tuple[str, str, int]] = set()
        self._next: dict[str, int] = {}
        self._again: list[str] = []
        #: reports built so far (a test reads it: a healthy steady state builds none), and the
        #: seconds they took
        self.looks = 0
        self.spent = 0.0

    # -- the cheap part: did this step do anything a rule is about? ------------------------
    def triggers(self, index: int, values: dict[str, float | None],
                 events: dict[str, int]) -> list[str]:
        rules = self.rules
        warm = self.warmup_steps if self.warmup_steps is not None else 0
        found = []
        if (rules is None or rules.max_recompiles is not None) and index >= warm and (
                _count(values.get("compile_count")) > 0 or events.get("cached")):
            found.append("compile")  # compiled, or met compiled in the backend's cache
        limit = 0 if rules is None else rules.max_syncs_per_step
        syncs = max(_count(values.get("from_device_count")), events.get("sync", 0))
        if limit is not None and syncs > limit and index >= warm:
            found.append("sync")
        if (rules is None or rules.no_fallbacks) and (
                _count(values.get("fallback_count")) > 0 or events.get("fallback_exec")
                or events.get("fallback")):
            found.append("fallback")
        if (rules is None or rules.no_graph_breaks) and (
                events.get("graph_break") or events.get("eager_fallback")):
            found.append("graph_break")
        if rules is not None and (rules.max_input_share is not None or
                                  rules.max_tracing_share is not None) and \
                index >= warm + 3 and (index - warm) % SHARE_EVERY == 0:
            found.append("time")  # a few steady steps more: where their time goes
        return found

    def after_step(self, recorder: Recorder) -> list[Alert]:
        """The alerts the step just recorded raises (usually none, without reading anything)."""
        index = recorder.steps - 1
        kinds = [k for k in self.triggers(index, recorder.last_values, recorder.last_events)
                 if index >= self._next.get(k, 0)]
        if not kinds and not self._again:  # a steady step: back to the program at once
            return []
        return self._look(kinds, index, lambda: self.report(recorder.writer.io_path(),
                                                            shown=recorder.writer.path),
                          recorder.elapsed())

    def after_steps(self, run: Run, first: int) -> list[Alert]:
        """The alerts steps ``first``.. of ``run`` raise: ``run`` is a run loaded while another
        process writes it (``lazyscope watch``), ``first`` the first step not seen before. The
        same triggers, step by step, and the same looks as :meth:`after_step` (one look for
        the whole batch, at its last step; none when no step triggers one)."""
        kinds: list[str] = []
        for index, values, events in step_activity(run, first):
            kinds += [k for k in self.triggers(index, values, events)
                      if index >= self._next.get(k, 0)]
        return self._look(list(dict.fromkeys(kinds)), len(run.steps) - 1,
                          lambda: self._build(run), None)

    @property
    def pending(self) -> bool:
        """Whether the next call looks even if no new step triggers it."""
        return bool(self._again)

    def _look(self, kinds: list[str], index: int, build: Callable[[], Report],
              elapsed: float | None) -> list[Alert]:
        again, self._again = self._again, []
        kinds = list(dict.fromkeys([*kinds, *again]))
        if not kinds:
            return []
        if self.budget is not None and elapsed is not None and \
                self.spent > max(self.budget * elapsed, FREE_LOOKS_S):
            self._again = kinds  # over the budget: the next step looks (it has more evidence)
            return []
        started = time.perf_counter()
        alerts = self.judge(build(), index)
        self.spent += time.perf_counter() - started
        if not alerts:
            # nothing new yet: a step's evidence can reach the run at the next barrier (XLA
            # holds a graph compiled in a steady step until the next step shows which user
            # line made it), so look once more then; syncs that recur at a site said already
            # are looked at again only after a quarter of the steps so far
            self._again = [k for k in kinds if k not in again]
            if "sync" in kinds and "sync" in again:
                self._next["sync"] = index + 1 + index // 4
        return alerts

    # -- the real part: the report's own rules --------------------------------------------
    def report(self, path: str | os.PathLike[str],
               shown: str | os.PathLike[str] | None = None) -> Report:
        """The report of the run at ``path`` so far; ``shown``: the run's own path, named in
        an error instead of ``path`` (``/proc/self/fd/N``, how the writer reaches its directory
        wherever it is now)."""
        try:
            run = load_run(path)
        except LazyscopeError as err:
            if shown is not None and os.fspath(path) != os.fspath(shown):
                err.args = (str(err).replace(os.fspath(path), os.fspath(shown)),)
            raise
        live = active()
        so_far = getattr(live, "info_so_far", None)
        if so_far is not None:  # what this process's trace holds until its end
            run.meta.info.update(so_far())
        return self._build(run)

    def _build(self, run: Run) -> Report:
        self.looks += 1
        return build_report(run, warmup_steps=self.warmup_steps, sources=SOURCES)

    def judge(self, report: Report, index: int) -> list[Alert]:
        """The alerts of ``report`` not said before."""
        if self.rules is None:
            return self._new([(f.kind, "", f) for f in report.findings
                              if f.kind in ALERT_KINDS], report, index)
        result = check_report(report, self.rules)
        found: list[tuple[str, str, Finding | None]] = []
        evidence: dict[str, tuple[str, ...]] = {}
        for v in result.violations:
            kinds = RULE_KINDS.get(v.rule)
            if kinds is None:
                continue
            matching = [f for f in [*report.findings, *report.notes] if f.kind in kinds]
            if v.rule == "max-syncs-per-step":  # the sync sites of the steps over the limit
                matching = [f for f in matching if any(
                    s >= self.rules.syncs_from_step for s in f.steps)] or matching
            found += [(v.rule, _message(v), f) for f in matching] or [(v.rule, _message(v), None)]
            evidence[v.rule] = tuple(v.evidence)
        return self._new(found, report, index, evidence)

    def _new(self, found: list[tuple[str, str, Finding | None]], report: Report,
             index: int, evidence: dict[str, tuple[str, ...]] | None = None) -> list[Alert]:
        alerts = []
        for rule, message, finding in found:
            key = (rule, finding.file, finding.line) if finding is not None else (rule, "", 0)
            if key in self.said:
                continue
            self.said.add(key)
            alerts.append(Alert(index, rule, message, finding, report,
                                (evidence or {}).get(rule, ()) if finding is None else ()))
        return alerts


#: the step values and event kinds :meth:`OnlineCheck.triggers` reads
_TRIGGER_FIELDS = ("compile_count", "from_device_count", "fallback_count")
_TRIGGER_EVENTS = ("sync", "fallback", "fallback_exec", "graph_break", "eager_fallback",
                   "cached")


def step_activity(run: Run, first: int
                  ) -> Iterator[tuple[int, dict[str, float | None], dict[str, int]]]:
    """``(index, values, events)`` of each step of ``run`` from ``first`` on that did anything
    :meth:`OnlineCheck.triggers` reads (what a trace's recorder holds of its last step: the
    step's values, its events by kind); the quiet steps are skipped (vectorised)."""
    steps, ev = run.steps, run.events
    n = len(steps)
    if first >= n:
        return
    busy = np.zeros(n - first, dtype=bool)
    columns: dict[str, np.ndarray] = {}
    for name in _TRIGGER_FIELDS:
        col = steps.col(name)
        if col is None:
            continue
        columns[name] = col
        part = col[first:n]
        busy |= np.nan_to_num(part) > 0
    kinds = [k for k in _TRIGGER_EVENTS if k in KIND_CODE]
    sel = np.flatnonzero(np.isin(ev.kind, [KIND_CODE[k] for k in kinds]) &
                         (ev.step >= first) & (ev.step < n)) if len(ev) else np.zeros(0, int)
    busy[np.unique(ev.step[sel]) - first] = True
    by_step: dict[int, dict[str, int]] = {}
    for i in sel:
        counts = by_step.setdefault(int(ev.step[i]), {})
        kind = EVENT_KINDS[int(ev.kind[i]) - 1]
        counts[kind] = counts.get(kind, 0) + 1
    for offset in np.flatnonzero(busy):
        index = first + int(offset)
        values: dict[str, float | None] = {name: float(col[index])
                                           for name, col in columns.items()}
        yield index, values, by_step.get(index, {})


def _message(v: Violation) -> str:
    """A check violation's message in the guard's words (its arguments, not the CLI's)."""
    return v.message.replace("(--warmup-steps)", "(warmup_steps)")


# --------------------------------------------------------------------------- live alerts


class LiveAlerts:
    """The live alerts of ``lazyscope trace``: the moment a finding of the report first becomes
    true (a site compiling new graphs, a per-step sync site, a fallback, a graph break), one line
    naming the line to change goes to ``write``. An observer of the trace (:meth:`attach`).
    Never raises into the program: an error of its own stops the alerts, said once."""

    def __init__(self, write: Callable[[str], None], *, warmup_steps: int | None = None,
                 enabled: bool = True):
        self.write = write
        self.warmup_steps = warmup_steps
        self.enabled = enabled
        self.check: OnlineCheck | None = None
        self.said = 0

    def attach(self, recorder: Recorder) -> None:
        if not self.enabled:
            return
        self.check = OnlineCheck(None, self.warmup_steps, budget=LOOK_BUDGET)
        recorder.step_hooks.append(lambda _index: self._after_step(recorder))

    def _after_step(self, recorder: Recorder) -> None:
        if self.check is None:
            return
        try:
            alerts = self.check.after_step(recorder)
            for alert in alerts:
                self.write(f"lazyscope: {alert.line()}")
                self.said += 1
        except Exception as err:  # noqa: BLE001 - never the program's problem
            self.check = None
            with contextlib.suppress(Exception):
                self.write(one_line(f"lazyscope: live alerts stopped: {type(err).__name__}: "
                                    f"{err} (the report at the end is not affected)"))


# --------------------------------------------------------------------------- the guard


def guard_error(alerts: list[Alert]) -> GuardError:
    rules = tuple(dict.fromkeys(a.rule for a in alerts))
    text = "\n".join(a.text() for a in alerts)
    return GuardError(f"lazyscope.guard: {text}", step=alerts[0].step, rules=rules,
                      findings=tuple(a.finding for a in alerts if a.finding is not None))


def _default_backend() -> str:
    """``xla`` when the program uses torch_xla (imported), else ``torchax`` when it uses
    torchax, else ``compile``."""
    if "torch_xla" in sys.modules:
        return "xla"
    return "torchax" if "torchax" in sys.modules else "compile"


class Guard(contextlib.ContextDecorator):
    """``with lazyscope.guard(...):`` (or ``@lazyscope.guard(...)``): see :func:`lazyscope.guard`.
    Each entry traces anew; entries do not nest (one trace per process)."""

    def __init__(self, rules: Rules, *, warmup_steps: int | None, backend: str = "auto",
                 out: str | os.PathLike[str] | None = None, force: bool = False,
                 target: str = "", on_alert: Callable[[Alert], None] | None = None):
        if backend not in ("auto", "xla", "compile", "eager", "torchax"):
            raise UsageError(f"lazyscope.guard: unknown backend {backend!r}; choose auto, xla, "
                             "compile, eager or torchax")
        self.rules = rules
        self.warmup_steps = warmup_steps
        self.backend = backend
        self.out = out
        self.force = force
        self.target = target
        self.on_alert = on_alert
        self.check: OnlineCheck | None = None
        self._tracer: Tracer | None = None
        self._scratch: str | None = None

    def __enter__(self) -> Guard:
        backend = _default_backend() if self.backend == "auto" else self.backend
        self.check = OnlineCheck(self.rules, self.warmup_steps)
        if self.out is None:
            self._scratch = tempfile.mkdtemp(prefix="lazyscope-guard-")
            out: str | os.PathLike[str] = Path(self._scratch) / "run"
        else:
            out = self.out
        tracer = api_tracer(out, options=TraceOptions(backend=backend,
                                                      warmup_steps=self.warmup_steps),
                            force=self.force, target=self.target)
        tracer.observers.append(self._observe)
        try:
            tracer.__enter__()
        except BaseException:
            self._clean()
            raise
        self._tracer = tracer
        refused: UsageError | None = None
        if tracer.nested_in is not None:
            where = f" (thread {tracer.outer_thread}'s)" if tracer.outer_thread else ""
            refused = UsageError(
                "lazyscope.guard() cannot be entered inside a lazyscope trace of the same "
                f"process{where} (the one writing {tracer.nested_in}): one trace per process at "
                "a time, whatever thread enters it; guard one thread, or the whole process")
        else:
            why = self._unmeasured(tracer)
            if why is not None:
                refused = UsageError(f"lazyscope.guard: {why}")
        if refused is not None:
            with contextlib.suppress(Exception):  # the run (out=) says it was refused
                tracer.__exit__(UsageError, refused, None)
            self._tracer = None
            self._clean()
            raise refused
        return self

    def _unmeasured(self, tracer: Tracer) -> str | None:
        """A rule on a metric the backend does not measure here, which would pass whatever the
        program did (``check`` refuses the same rule): why, or None."""
        caps = tracer.meta.capabilities
        if self.rules.max_syncs_per_step is not None and "sync" not in caps.events:
            return (f"max_syncs_per_step cannot be checked: host syncs are not measured by the "
                    f"{tracer.meta.backend} backend on {tracer.meta.device or 'this device'} "
                    "(as `lazyscope check --max-syncs-per-step` refuses it)")
        return None

    def _observe(self, recorder: Recorder) -> None:
        recorder.step_hooks.append(lambda _index: self._after_step(recorder))

    def _after_step(self, recorder: Recorder) -> None:
        assert self.check is not None
        alerts = self.check.after_step(recorder)
        if alerts:
            for alert in alerts:
                if self.on_alert is not None:
                    self.on_alert(alert)
            raise guard_error(alerts)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        tracer, self._tracer = self._tracer, None
        if tracer is None:
            return False
        try:
            tracer.__exit__(exc_type, exc, tb)
            if exc_type is None and self.check is not None and tracer.recorder is not None:
                # the work after the last barrier, and a program that marks no steps
                # (torch.compile without lazyscope.barrier()): the whole run, at the end
                report = self.check.report(tracer.path)
                alerts = self.check.judge(report, max(report.summary.steps - 1, 0))
                if alerts:
                    raise guard_error(alerts)
        finally:
            self._clean()
        return False

    def _clean(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @property
    def run_dir(self) -> Path | None:
        """The run directory kept (``out=``), else None."""
        return Path(self.out) if self.out is not None else None


def make_guard(*, max_recompiles: int | None = 0, warmup_steps: int | None = 2,
               max_syncs_per_step: int | None = None, no_fallbacks: bool = False,
               no_graph_breaks: bool = False, max_input_share: float | None = None,
               max_tracing_share: float | None = None, backend: str = "auto",
               out: str | os.PathLike[str] | None = None, force: bool = False,
               target: str = "") -> Guard:
    for name, value in (("max_recompiles", max_recompiles), ("warmup_steps", warmup_steps),
                        ("max_syncs_per_step", max_syncs_per_step)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            raise UsageError(f"lazyscope.guard: {name} must be a whole number >= 0 or None, "
                             f"got {value!r}")
    for name, share in (("max_input_share", max_input_share),
                        ("max_tracing_share", max_tracing_share)):
        if share is not None and (not isinstance(share, (int, float)) or isinstance(share, bool)
                                  or not 0 <= share <= 1):
            raise UsageError(f"lazyscope.guard: {name} must be a share between 0 and 1 or "
                             f"None, got {share!r}")
    rules = Rules(max_recompiles=max_recompiles, max_syncs_per_step=max_syncs_per_step,
                  no_fallbacks=no_fallbacks, no_graph_breaks=no_graph_breaks,
                  max_input_share=max_input_share, max_tracing_share=max_tracing_share,
                  allow_incomplete=True, syncs_from_step=warmup_steps or 0)
    if not rules.any_rule():
        raise UsageError("lazyscope.guard: no rule to check (every rule is None or False)")
    return Guard(rules, warmup_steps=warmup_steps, backend=backend, out=out, force=force,
                 target=target)


__all__ = ["ALERT_KINDS", "Alert", "Guard", "LiveAlerts", "OnlineCheck", "make_guard"]

