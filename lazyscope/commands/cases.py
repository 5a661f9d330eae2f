"""``lazyscope compare``: the same scenario under several padding policies, side by side; and
``lazyscope advise``'s inputs (a run, a comparison, a lengths file: :func:`advise_target`).

Each policy runs as its own ``python -m lazyscope trace [OPTIONS] SCENARIO --padding POLICY ...``
subprocess, so each starts with an empty XLA compile cache (torch_xla's cache lives for the
whole process: in one process the second policy would reuse the first one's graphs). Every run
directory is kept under ``OUT/<policy>/``; ``OUT/compare.json`` holds the table.

``auto`` is a policy like the others: the scenario resolves it with the advisor on its own
length stream (``lazyscope advise``'s ranking, uncalibrated, for the run's ``--steps``), so the
recommendation is measured beside the rest; its row says what it ran (``resolved``).

Order: the policies and the scenario's arguments are validated (with the scenario's own parser)
before anything is written; ``OUT`` is never replaced without ``--force``, and then only when it
holds a previous comparison. A policy whose run fails is reported in its row and the others
still run; :func:`run_compare` returns the result and lets the CLI pick the exit code.

``backends`` (``lazyscope compare --backends xla,compile``): every backend x policy runs in its
own process (``trace --backend B``); runs are kept under ``OUT/<backend>/<policy>/``, each row is
labelled ``backend/policy`` and carries ``backend``; the ratios add each backend's tokens/s over
the first backend's for the same policy. One table, one picture.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lazyscope.analyze.buckets import (
    Advice,
    MeasuredRow,
    NoLengths,
    NothingFits,
    advice_for_run,
    advise,
    match_measured,
)
from lazyscope.analyze.compare import CompareRow, Comparison, compare_row, failed_row, ratios
from lazyscope.backends import BACKENDS
from lazyscope.backends.runner import resolve_target, validate_scenario_args
from lazyscope.commands.console import CaseUpdate, read_progress
from lazyscope.core.errors import LazyscopeError, OutputError, RunDirError, UsageError
from lazyscope.core.padding import Policy, read_lengths
from lazyscope.core.signals import Terminated
from lazyscope.core.units import counted, duration
from lazyscope.model import Run, runs_by_rank
from lazyscope.model.builders import collator_source
from lazyscope.model.codec import decode
from lazyscope.model.info import Workload
from lazyscope.render.json import dumps
from lazyscope.store import atomic_write_text, load_run, load_target
from lazyscope.store.layout import COMPARE_JSON, META_FILE

DEFAULT_POLICIES = "max,longest,pow2,bucket:auto,packed,auto"
NOT_MEASURED_FILE = "not measured: a lengths file has no compiled graphs"


def policy_slug(policy: str) -> str:
    """A directory name for a policy: ``bucket:64,128`` -> ``bucket-64-128``."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", policy).strip("-") or "policy"


def parse_policies(text: str) -> list[str]:
    """Split ``max,longest,bucket:64,128,packed`` into policies (bucket lists keep their
    commas: a bare number continues the bucket list before it)."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise UsageError(f"empty policy in --policies {text!r}")
        if part.lstrip("-").isdigit() and out and out[-1].startswith("bucket:") \
                and out[-1] != "bucket:auto":
            out[-1] += "," + part
        else:
            out.append(part)
    if len(set(out)) != len(out):
        raise UsageError(f"a policy is repeated in --policies {text!r}")
    return out


def parse_backends(text: str | None) -> list[str]:
    """``xla,compile`` -> ``["xla", "compile"]``; UsageError naming the choices."""
    if not text:
        return []
    out = [b.strip() for b in text.split(",")]
    for b in out:
        if b not in BACKENDS:
            raise UsageError(f"unknown backend {b!r} in --backends; choose from: "
                             f"{', '.join(sorted(BACKENDS))}")
    if len(set(out)) != len(out):
        raise UsageError(f"a backend is repeated in --backends {text!r}")
    return out


def _validate(scenario: str, policies: list[str], steps: int, extra: list[str]) -> Path:

    target = resolve_target(scenario, [])
    if target.kind != "scenario":
        raise UsageError("compare runs a built-in scenario (see `lazyscope scenarios`)")
    if "--padding" in extra:
        raise UsageError("give the padding policies with --policies, not --padding")
    for policy in policies:
        target.argv = ["--padding", policy, "--steps", str(steps), *extra]
        validate_scenario_args(target)
    return target.path


def _prepare_out(out: Path, force: bool) -> None:
    if out.exists():
        if not out.is_dir():
            raise RunDirError(f"{out} exists and is not a directory")
        if any(out.iterdir()):
            if not force:
                raise RunDirError(f"{out} already exists; use --force to replace it")
            if not (out / COMPARE_JSON).exists():
                raise RunDirError(
                    f"{out} is not a lazyscope comparison (no {COMPARE_JSON}); not replacing it"
                )
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def run_compare(
    scenario: str,
    policies: list[str],
    *,
    steps: int,
    out: Path,
    extra: list[str] | None = None,
    force: bool = False,
    progress: Callable[[CaseUpdate], None] | None = None,
    timeout: float | None = None,
    backends: list[str] | None = None,
    repeat: int = 1,
) -> Comparison:
    """Trace ``scenario`` once per policy (and per backend, when ``backends`` is given) in fresh
    processes, ``repeat`` rounds of them (each row then shows its median run, ``repeats`` the
    real tokens/s of every one); return the :class:`Comparison`, also written to
    ``out/compare.json``.

    ``progress`` hears about each case while it runs (its steps and compilations, read from the
    case's process through a pipe: ``trace --progress-fd``) and when it ends (a one-line
    summary)."""
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    extra = list(extra or [])
    backends = list(backends or [])
    if not policies:
        raise UsageError("no policies to compare")
    if backends and "--backend" in extra:
        raise UsageError("give the backends with --backends, not --backend")
    _validate(scenario, policies, steps, extra)
    _prepare_out(out, force)
    say = progress or (lambda _update: None)
    env = {**os.environ}
    root = str(Path(__file__).resolve().parents[2])  # the directory holding lazyscope/
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    failures: dict[str, str] = {}
    cases = [(b, p) for b in backends for p in policies] if backends else \
        [(None, p) for p in policies]
    done: dict[int, list[tuple[str, CompareRow | None]]] = {i: [] for i in range(len(cases))}
    total = len(cases) * repeat
    n = 0
    # rounds in alternating order (ABBA): a load that drifts during the comparison weighs on
    # every policy alike
    order = list(range(len(cases)))
    runs = [(round_, i) for round_ in range(repeat)
            for i in (order if round_ % 2 == 0 else order[::-1])]
    clock = TimeLeft([cases[i] for _, i in runs], steps)
    if total > 1:
        say(CaseUpdate(0, total, "", "note", line=(
            f"lazyscope compare: {counted(total, 'run')} of {counted(steps, 'step')}, each in a "
            f"fresh process; the time they take follows from the first run's first "
            f"{counted(min(steps, CALIBRATION_STEPS), 'step')}")))
    for round_, i in runs:
        backend, policy_name = cases[i]
        n += 1
        policy = f"{backend}/{policy_name}" if backend else policy_name
        slug = f"{backend}/{policy_slug(policy_name)}" if backend else policy_slug(policy_name)
        if round_:
            slug += f".r{round_ + 1}"
        say(CaseUpdate(n, total, policy, "running"))
        began = time.monotonic()

        seen: list[tuple[float, int]] = []  # (when, steps done) of this run's progress

        def on_step(steps_done: int, compiles: int, n: int = n, policy: str = policy,
                    case: tuple[str | None, str] = cases[i], slug: str = slug,
                    began: float = began, seen: list[tuple[float, int]] = seen) -> None:
            say(CaseUpdate(n, total, policy, "running", steps_done, compiles))
            now = time.monotonic()
            seen.append((now, steps_done))
            if n == 1 and clock.startup is None and steps_done >= 1:
                clock.startup = now - began
            if n == 1 and clock.calibrated_on is None and total > 1 and \
                    steps_done >= min(steps, CALIBRATION_STEPS) and \
                    clock.calibrate(out / slug, case, steps_done):
                line = clock.first_line(total)
                if line:
                    say(CaseUpdate(n, total, policy, "note", line=line))
            # its own pace over its last half of steps (a compile at every step, or at none)
            half = [(t, k) for t, k in seen if k >= steps_done // 2]
            if min(steps, CALIBRATION_STEPS) <= steps_done < steps and len(half) > 1 and \
                    half[-1][1] > half[0][1]:
                recent = (half[-1][0] - half[0][0]) / (half[-1][1] - half[0][1])
                left = clock.running(n - 1, now - began, steps_done, recent)
                if left is not None:
                    say(CaseUpdate(n, total, policy, "eta", line=f"about {duration(left)} left"))

        try:
            path, row, err = _run_case(scenario, policy, policy_name, backend, steps,
                                       extra, out, slug, env, timeout, on_step)
        except OSError as exc:  # compare's own write (a policy's log): as trace says it
            raise OutputError.from_os(exc, exc.filename or out / f"{slug}.log") from None
        if err is not None and err.startswith(NO_SPACE_LINE):
            # the disk filled under the policy's trace (its run is kept, status no_space):
            # every policy after it would fill it too
            raise OutputError(f"{policy}: {err.removeprefix('lazyscope: ')}")
        clock.finished(cases[i], time.monotonic() - began,
                       row.wall_s if row is not None and err is None else None)
        if row is not None and err is None and n < total:
            clock.calibrate(Path(path), cases[i], row.steps)  # the whole run: every length
        left = clock.after(n)
        done[i].append((path, row))
        if err is not None:
            failures[policy] = err
        label = policy + (f" ({row.resolved})" if row is not None and row.resolved else "")
        if row is None:
            say(CaseUpdate(n, total, policy, "failed",
                           line=f"[{n}/{total}] {label:<14} FAILED: {err}{left}"))
            continue
        eff = row.padding_efficiency
        say(CaseUpdate(
            n, total, policy, "failed" if err is not None else "done", row.steps,
            row.compiles, line=(
                f"[{n}/{total}] {label:<14} {counted(row.steps, 'step')}, "
                f"{counted(row.compiles, 'compile')}, "
                f"{row.wall_s:.1f} s wall, {row.tokens_per_s:,.0f} real tokens/s, "
                f"padding efficiency {'-' if eff is None else f'{eff:.2f}'}"
                + (f"  FAILED: {err}" if err is not None else "") + left)))
    rows: list[CompareRow] = []
    for i, (backend, policy_name) in enumerate(cases):
        policy = f"{backend}/{policy_name}" if backend else policy_name
        row = _median_row(done[i])
        if row is None:
            row = failed_row(policy, done[i][0][0], failures[policy])
        elif policy in failures:
            row = replace(row, status="failed", error=failures[policy])
        if backend:
            row = replace(row, backend=backend)
        rows.append(row)
    result = Comparison(
        scenario=scenario, steps=steps, args=extra, policies=policies, backends=backends,
        rows=rows,
        ratios=backend_ratios(rows, backends, policies) if backends else ratios(rows),
        failed=sorted(failures), repeat=repeat,
    )
    try:
        atomic_write_text(out / COMPARE_JSON, dumps(result) + "\n")
    except OSError as exc:
        raise OutputError.from_os(exc, out / COMPARE_JSON) from None
    return result


#: a policy's first steps the comparison's estimate is calibrated on
CALIBRATION_STEPS = 10


class TimeLeft:
    """How long the rest of a comparison takes, said before it is mostly done and after each
    run, with how to shorten it.

    Policies differ by orders of magnitude (pad to max compiles once; pad to longest compiles
    at most steps, minutes on XLA:CPU), so the runs done say little about the runs to come. Once
    the first run has done its first :data:`CALIBRATION_STEPS` steps, its run so far calibrates
    the advisor (``advice_for_run``: seconds per compiled graph, per unit of padded work) and
    every policy is priced for the comparison's steps (:func:`~lazyscope.analyze.buckets
    .predict_compare`: the graphs it is expected to compile, the work of its batches), plus
    each run's start-up and ending (measured: its first step's latency, then each finished run's
    time beyond its steps). Each run that ends calibrates it again (the whole run: every length
    it saw), and from two on, the finished runs' steps against their predictions rescale the
    rest (the median ratio). A running policy's own first steps (:meth:`running`) project its
    end. A policy run before (``--repeat``) is its measured time; without a prediction (a
    workload the advisor cannot read: no lengths), the mean of the runs done."""

    def __init__(self, schedule: list[tuple[str | None, str]], steps: int):
        #: (backend, policy) of each run, in the order they run
        self.schedule = schedule
        self.steps = steps
        self.predicted: dict[tuple[str | None, str], float] = {}
        self.halved: dict[tuple[str | None, str], float] = {}
        self.took: dict[tuple[str | None, str], list[float]] = {}
        self.overheads: list[float] = []
        self.ratios: list[float] = []
        self.startup: float | None = None
        self.calibrated_on: str | None = None

    def calibrate(self, run_dir: Path, case: tuple[str | None, str], steps_done: int) -> bool:
        """Price every policy from ``run_dir`` (the first run so far, or a run that ended: more
        of the workload's lengths, its own compile and step seconds); True when it could."""
        from lazyscope.analyze.buckets import advice_for_run, predict_compare

        try:
            run = load_run(run_dir)
            if self.startup is not None and len(run.steps) and not self.overheads:
                # the first step's latency held its own work (its compilation): start-up is
                # the rest
                first = float(run.steps.values("wall_s")[0])
                self.startup = max(0.0, self.startup - (first if first == first else 0.0))
            advice = advice_for_run(run, horizon=self.steps)
            names = [p for b, p in self.schedule if b == case[0]]
            full = predict_compare(advice, names, self.steps)
            half = predict_compare(advice, names, max(1, self.steps // 2))
        except (LazyscopeError, NoLengths, NothingFits, ValueError, OSError):
            return False
        if not advice.cost_model.calibrated:
            return False
        for name, plan in full.items():
            self.predicted[(case[0], name)] = plan.compile_s + plan.execute_s
        for name, plan in half.items():
            self.halved[(case[0], name)] = plan.compile_s + plan.execute_s
        self.calibrated_on = f"{case[1]}'s first {counted(steps_done, 'step')}"
        return True

    def finished(self, case: tuple[str | None, str], seconds: float,
                 step_seconds: float | None) -> None:
        """A run ended after ``seconds``, ``step_seconds`` of them its steps' (None: failed)."""
        self.took.setdefault(case, []).append(seconds)
        if step_seconds is not None:
            self.overheads.append(max(0.0, seconds - step_seconds))
            predicted = self.predicted.get(case)
            if predicted and predicted > 0 and len(self.took[case]) == 1:
                self.ratios.append(step_seconds / predicted)

    def _scale(self) -> float:
        if len(self.ratios) < 2:  # one policy's error says little of another's
            return 1.0
        return float(sorted(self.ratios)[len(self.ratios) // 2])

    def _overhead(self) -> float:
        if self.overheads:
            return sum(self.overheads) / len(self.overheads)
        return self.startup or 0.0

    def estimate(self, case: tuple[str | None, str], halved: bool = False) -> float | None:
        """One run of ``case`` (``halved``: with half the steps), None when nothing says."""
        table = self.halved if halved else self.predicted
        if case in self.took and not halved:
            return sum(self.took[case]) / len(self.took[case])
        if case in table:
            return self._overhead() + self._scale() * table[case]
        done = [t for ts in self.took.values() for t in ts]
        if not done:
            return None
        mean = sum(done) / len(done)
        return mean / 2 if halved else mean

    def left(self, after: int) -> tuple[float, dict[str, float]] | None:
        """The seconds the runs after the first ``after`` take, and each policy's share."""
        per: dict[str, float] = {}
        for backend, policy in self.schedule[after:]:
            t = self.estimate((backend, policy))
            if t is None:
                return None
            name = f"{backend}/{policy}" if backend else policy
            per[name] = per.get(name, 0.0) + t
        return sum(per.values()), per

    def shorter(self, after: int) -> str:
        """How to shorten what is left: fewer steps, or without the policy that takes longest."""
        left = self.left(after)
        if left is None or not left[1]:
            return ""
        total, per = left
        ways = []
        if self.steps > 1:
            half = [self.estimate(case, halved=True) for case in self.schedule[after:]]
            shorter = sum(h for h in half if h is not None)
            if all(h is not None for h in half) and shorter < 0.8 * total:
                ways.append(f"--steps {self.steps // 2} (about {duration(shorter)})")
        slowest, most = max(per.items(), key=lambda kv: kv[1])
        if len(per) > 1 and most > 0.5 * total:
            ways.append(f"--policies without {slowest} (about {duration(total - most)})")
        return "; shorter: " + " or ".join(ways) if ways else ""

    def first_line(self, runs: int) -> str:
        """The estimate said once the first run's first steps calibrated it."""
        left = self.left(0)
        if left is None:
            return ""
        total, per = left
        each = ", ".join(f"{name} ~{duration(t)}" for name, t in per.items())
        return (f"lazyscope compare: about {duration(total)} for the {counted(runs, 'run')} "
                f"({each}), calibrated on {self.calibrated_on}{self.shorter(0)}")

    def running(self, done: int, elapsed: float, steps_done: int,
                recent: float | None) -> float | None:
        """The seconds left while run ``done + 1`` has done ``steps_done`` steps in
        ``elapsed`` seconds, its last steps at ``recent`` seconds each: its own end projected
        from them, then the runs after it."""
        rest = self.left(done + 1)
        if recent is None or rest is None:
            return None
        return max(0.0, (self.steps - steps_done) * recent) + rest[0]

    def after(self, done: int) -> str:
        """`` (about 4.1 min left for 3 runs ...)`` after ``done`` runs; "" when none is left."""
        runs = len(self.schedule) - done
        left = self.left(done) if runs > 0 else None
        if left is None:
            return ""
        total, per = left
        slowest, most = max(per.items(), key=lambda kv: kv[1])
        of = f", {slowest} ~{duration(most)} of it" if len(per) > 1 else ""
        return (f"  (about {duration(total)} left for {counted(runs, 'run')}{of}"
                f"{self.shorter(done)})")


def _run_case(scenario: str, policy: str, policy_name: str, backend: str | None, steps: int,
              extra: list[str], out: Path, slug: str, env: dict[str, str],
              timeout: float | None, on_step: Callable[[int, int], None]
              ) -> tuple[str, CompareRow | None, str | None]:
    """One policy's run in a fresh process: ``(run directory, its row or None, the error line
    or None)``; ``on_step(steps, compilations)`` while it runs."""
    run_dir = out / slug
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    # --no-views: the comparison draws its own picture and page; a policy's run draws
    # its views on request (`lazyscope report DIR/<policy> --format html`)
    cmd = [sys.executable, "-m", "lazyscope", "trace", "--steps", str(steps),
           "--out", str(run_dir), "--no-views", *(["--backend", backend] if backend else []),
           scenario, "--padding", policy_name, *extra]
    code, err = _run_process(cmd, env, out / f"{slug}.log", timeout, on_step)
    try:
        run = load_run(run_dir)
    except LazyscopeError as exc:
        return str(run_dir), None, err if code else str(exc)
    return str(run_dir), compare_row(policy, run), err if code else None


#: how a trace says the disk filled (its last stderr line)
NO_SPACE_LINE = "lazyscope: no space left on "
#: how long a policy's trace may take to finalise its run after compare was stopped
STOP_GRACE_S = 60


def _run_process(cmd: list[str], env: dict[str, str], log: Path, timeout: float | None,
                 on_step: Callable[[int, int], None]) -> tuple[int, str]:
    """Run one case's ``lazyscope trace`` (``cmd``) with a progress pipe; its stdout, then its
    stderr, go to ``log``. Returns ``(exit code, the last line it wrote to stderr)`` (-1 on a
    timeout)."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err_file:
        try:
            with open(log, "w", encoding="utf-8") as out_file:
                # a process group of its own: a signal compare gets (Ctrl-C at the terminal,
                # kill -INT from a process manager) reaches the trace once, forwarded
                proc = subprocess.Popen([*cmd[:4], "--progress-fd", str(write_end), *cmd[4:]],
                                        env=env, stdout=out_file, stderr=err_file,
                                        pass_fds=(write_end,), text=True, process_group=0)
        finally:
            os.close(write_end)  # the child has its own copy: EOF comes when it exits

        def follow() -> None:
            with os.fdopen(read_end, encoding="utf-8", errors="replace") as pipe:
                for line in pipe:
                    found = read_progress(line)
                    if found is not None:
                        on_step(*found)

        reader = threading.Thread(target=follow, name="lazyscope-compare-progress", daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout)
            err_file.seek(0)
            err = _last_line(err_file.read())
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code, err = -1, f"timed out after {timeout} s"
        except BaseException as exc:
            _stop_with(proc, exc)
            raise
        reader.join(timeout=10)
        err_file.seek(0)
        try:
            with open(log, "a", encoding="utf-8") as out_file:
                out_file.write(err_file.read())
        except OSError:
            if not err.startswith(NO_SPACE_LINE):
                raise
            # the trace filled the disk its log is on: its own line says where, and wins
            return code, err
    if code != 0 and err == "no output":
        err = _last_line(log.read_text(encoding="utf-8", errors="replace"))
    return code, err


def _stop_with(proc: subprocess.Popen[str], exc: BaseException) -> None:
    """compare itself was stopped while a policy's trace ran: the signal (SIGINT for Ctrl-C or
    ``kill -INT``, the termination signal otherwise) is passed on to the trace at once (it runs
    in a process group of its own: nothing else sends it one) and it is waited for, so it
    finalises its run (status ``interrupted``) instead of being killed or left running."""
    if proc.poll() is None:
        if isinstance(exc, Terminated):
            proc.send_signal(exc.signum)
        elif isinstance(exc, KeyboardInterrupt):
            proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except BaseException:  # noqa: BLE001 - stopped again: stop waiting
        proc.kill()
        proc.wait()


def _median_row(done: list[tuple[str, CompareRow | None]]) -> CompareRow | None:
    """The run with the median real tokens/s of a policy's repeats (the lower median), with
    every repeat's tokens/s in ``repeats``; None when none loaded."""
    rows = [r for _, r in done if r is not None]
    if not rows:
        return None
    if len(done) == 1:
        return rows[0]
    ranked = sorted(rows, key=lambda r: r.tokens_per_s)
    return replace(ranked[(len(ranked) - 1) // 2],
                   repeats=tuple(round(r.tokens_per_s, 1) for r in rows))


def load_comparison(compare_dir: Path) -> Comparison:
    """``DIR/compare.json`` as a :class:`Comparison`; RunDirError (exit 3) when it is missing
    or not a comparison."""
    path = Path(compare_dir) / COMPARE_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{compare_dir} is not a lazyscope comparison (no {COMPARE_JSON})") \
            from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunDirError(f"cannot read {path}: {err}") from None
    try:
        return decode(Comparison, data)
    except ValueError as err:
        raise RunDirError(f"{path}: not a lazyscope comparison: {err}") from None


def backend_ratios(rows: list[CompareRow], backends: list[str],
                   policies: list[str]) -> dict[str, float]:
    """Real tokens/s of each backend over the first backend's, policy by policy; then, inside
    each backend, every policy over its ``longest`` and ``max`` (as :func:`ratios`)."""
    by = {r.policy: r for r in rows if r.tokens_per_s > 0}
    out: dict[str, float] = {}
    first = backends[0]
    for policy in policies:
        base = by.get(f"{first}/{policy}")
        for b in backends[1:]:
            r = by.get(f"{b}/{policy}")
            if base and r:
                out[f"{b}/{policy} / {first}/{policy}"] = r.tokens_per_s / base.tokens_per_s
    for b in backends:
        mine = [r for r in rows if r.backend == b]
        out.update({f"{b}: {k}": v for k, v in ratios(mine).items()})
    return out


#: lengths of a file the advice is computed on, at most: a seeded random sample of a longer
#: file (its histogram is the file's to a fraction of a percent; said in a note)
ADVISE_SAMPLE = 1_000_000


def read_lengths_file(path: Path, notes: list[str] | None = None) -> Any:
    """One positive integer per line (blank lines skipped; ``-`` is standard input), streamed
    with bounds (:func:`lazyscope.core.padding.read_lengths`); UsageError naming the bad line."""
    try:
        return read_lengths(path, notes=notes)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _sampled(values: Any, notes: list[str], name: str) -> list[int]:
    """``values`` as a list, or a seeded random sample of :data:`ADVISE_SAMPLE` of them (in a
    random order: the random batches the advice assumes), with a note."""
    import numpy as np

    if len(values) <= ADVISE_SAMPLE:
        return [int(v) for v in values]
    picked = np.random.default_rng(0).choice(len(values), ADVISE_SAMPLE, replace=False)
    notes.append(f"advised on a random sample of {ADVISE_SAMPLE:,} of the {len(values):,} "
                 f"lengths of {name} (seeded)")
    return [int(v) for v in values[picked]]


# ---- advise: a run, a comparison or a lengths file -> Advice ------------------------------


def policy_of_run(work: Workload) -> Policy | None:
    """The policy a scenario run recorded (``set_info``: ``packed_rows``, ``buckets``,
    ``batching``; ``auto`` resolved), or None when it recorded none."""
    grouped = work.batching == "grouped"
    packed = work.packed_rows
    if packed is not None and len(packed) == 2:
        return Policy("packed", (packed[1],), rows=packed[0], row_len=packed[1])
    if work.policy == "packed":  # runs of the previous release: batch x max_len rows
        n, rows = work.max_len, work.batch
        return Policy("packed", (n,), rows=rows, row_len=n) if n and rows else None
    if work.policy == "longest":
        return Policy("longest", grouped=grouped)
    buckets = work.buckets
    if buckets:
        kind = "max" if len(buckets) == 1 and buckets[0] == work.max_len else "buckets"
        return Policy(kind, tuple(buckets), grouped=grouped)
    return None


def _measured(comparison: Comparison) -> list[MeasuredRow]:
    out = []
    for row in comparison.rows:
        if not row.ok:
            continue
        try:
            work = load_run(Path(row.path)).meta.run_info.workload
        except LazyscopeError:
            continue
        policy = policy_of_run(work)
        if policy is not None:
            out.append(MeasuredRow(_row_label(row), policy, row.steps, row.compiles,
                                   row.padding_efficiency, row.tokens_per_s,
                                   row.graph_memory))
    return out


def _row_label(row: CompareRow) -> str:
    return row.policy + (f" ({row.resolved})" if row.resolved else "")


def _compare_dir_of(path: Path) -> Path | None:
    """``path`` itself when it is a comparison, else its parent when ``path`` is one of the
    comparison's runs."""
    if (path / COMPARE_JSON).is_file():
        return path
    if (path.parent / COMPARE_JSON).is_file():
        return path.parent
    return None


def _run_of_comparison(comparison: Comparison, where: Path) -> Path:
    """The run of a comparison to read the lengths from: a padded policy's (its steps hold
    ``batch`` sequences each, as the user's run would), else any that succeeded."""
    ok = [r for r in comparison.rows if r.ok]
    for r in ok:
        if r.name in ("max", "longest", "pow2") or r.name.startswith("bucket:"):
            return Path(r.path)
    if ok:
        return Path(ok[0].path)
    raise UsageError(f"{where}: no policy of this comparison ran: nothing to advise on")


def _one_run(path: Path) -> Run:
    """The run to advise on: ``path``'s run; of a pod (a run at a URL) or a multi-process run,
    its first host's (rank's) run: every host reads the same data."""
    target = load_target(path)
    return target if isinstance(target, Run) else min(runs_by_rank(target).items())[1]


def advise_target(target: Path | None, *, lengths_file: Path | None = None,
                  max_buckets: int = 8, horizon: int | None = None, batch: int | None = None,
                  max_len: int | None = None, grouped: bool = False, packing: bool = True,
                  compare_dir: Path | None = None, device_memory: int | None = None) -> Advice:
    """The advice for a run directory (calibrated on it), a ``compare`` directory (on one of its
    padded runs, with every policy's measured numbers beside the predicted ones) or a lengths
    file. UsageError (exit 2) when there is nothing to advise on; RunDirError (exit 3) for an
    unreadable run or comparison; UsageError too when ``device_memory`` is given and the run's
    graph memory is not measured, or no policy fits in it."""
    if (target is None) == (lengths_file is None):
        raise UsageError("give either RUN_DIR or --lengths FILE")
    if lengths_file is not None:
        if device_memory is not None:
            raise UsageError(f"--device-memory cannot be applied: {NOT_MEASURED_FILE}")
        notes: list[str] = []
        array = read_lengths_file(lengths_file, notes)
        longest = int(array.max())
        top = max_len or longest
        if longest > top:
            raise UsageError(f"--max-len {top} is below the longest length {longest}")
        values = _sampled(array, notes, "standard input" if str(lengths_file) == "-"
                          else str(lengths_file))
        del array
        try:
            advice = advise(values, batch=batch or 8, top=top, max_buckets=max_buckets,
                            grouped=grouped, horizon=horizon, packing=packing)
        except ValueError as err:
            raise UsageError(str(err)) from None
        advice = replace(advice, notes=(*notes, *advice.notes), memory_note=NOT_MEASURED_FILE)
    else:
        assert target is not None
        comparison_dir = compare_dir or _compare_dir_of(target)
        run_dir = target
        if (target / COMPARE_JSON).is_file() and not (target / META_FILE).exists():
            run_dir = _run_of_comparison(load_comparison(target), target)
        run = _one_run(run_dir)
        try:
            advice = advice_for_run(run, max_buckets=max_buckets, horizon=horizon,
                                    top=max_len, packing=packing, device_memory=device_memory)
        except NoLengths as err:
            raise UsageError(f"{target}: nothing to advise on: {err}") from None
        except NothingFits as err:
            raise UsageError(f"{target}: --device-memory: {err}") from None
        if device_memory is not None and advice.memory is None:
            raise UsageError(f"{target}: --device-memory cannot be applied: graph memory "
                             f"{advice.memory_note}")
        if advice.collator is not None:  # where the program builds it, and its name there
            files = list((run.meta.run_info.sources.lines or {}).keys())
            advice = replace(advice, collator=collator_source(advice.collator, files))
        if comparison_dir is not None:
            comparison = load_comparison(comparison_dir)
            advice = match_measured(advice, _measured(comparison), compared=str(comparison_dir))
        if run.warnings:  # what the run's files lost: the advice is on what loaded
            advice = replace(advice, notes=(*(f"warning: {w}" for w in run.warnings),
                                            *advice.notes))
    return advice
