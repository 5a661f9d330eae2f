"""``lazyscope compare``: the same scenario under several padding policies, side by side.

Each policy runs as its own ``python -m lazyscope trace SCENARIO --padding POLICY ...``
subprocess, so each starts with an empty XLA compile cache (torch_xla's cache lives for the
whole process: in one process the second policy would reuse the first one's graphs). Every run
directory is kept under ``OUT/<policy>/``; ``OUT/compare.json`` holds the table.

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
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lazyscope.analyze.compare import compare_rows, failed_row, ratios
from lazyscope.backends import BACKENDS
from lazyscope.errors import LazyscopeError, RunDirError, UsageError
from lazyscope.padding import read_lengths
from lazyscope.runner import resolve_target, validate_scenario_args
from lazyscope.store import load_run

COMPARE_JSON = "compare.json"
DEFAULT_POLICIES = "max,longest,pow2,bucket:auto,packed"


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
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
    backends: list[str] | None = None,
) -> dict[str, Any]:
    """Trace ``scenario`` once per policy (and per backend, when ``backends`` is given) in fresh
    processes; return the comparison dict (``scenario``, ``steps``, ``args``, ``rows``,
    ``ratios``, ``failed``, ``backends``) also written to ``out/compare.json``."""
    extra = list(extra or [])
    backends = list(backends or [])
    if not policies:
        raise UsageError("no policies to compare")
    if backends and "--backend" in extra:
        raise UsageError("give the backends with --backends, not --backend")
    _validate(scenario, policies, steps, extra)
    _prepare_out(out, force)
    say = progress or (lambda _line: None)
    env = {**os.environ}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    named = []
    failures: dict[str, str] = {}
    cases = [(b, p) for b in backends for p in policies] if backends else \
        [(None, p) for p in policies]
    total = len(cases)
    for n, (backend, policy_name) in enumerate(cases, 1):
        policy = f"{backend}/{policy_name}" if backend else policy_name
        slug = f"{backend}/{policy_slug(policy_name)}" if backend else policy_slug(policy_name)
        run_dir = out / slug
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        # --no-views: the comparison draws its own picture and page; a policy's run draws
        # its views on request (`lazyscope report DIR/<policy> --format html`)
        cmd = [sys.executable, "-m", "lazyscope", "trace", scenario, "--steps", str(steps),
               "--out", str(run_dir), "--no-views", "--padding", policy_name, *extra]
        if backend:
            cmd[4:4] = ["--backend", backend]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            (out / f"{slug}.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
            code, err = proc.returncode, _last_line(proc.stderr or proc.stdout)
        except subprocess.TimeoutExpired:
            code, err = -1, f"timed out after {timeout} s"
        try:
            run = load_run(run_dir)
        except LazyscopeError as exc:
            failures[policy] = err if code else str(exc)
            named.append((policy, None, str(run_dir), None))
            say(f"[{n}/{total}] {policy:<14} FAILED: {failures[policy]}")
            continue
        if code != 0:
            failures[policy] = err
        row = compare_rows([(policy, run)])[0]
        named.append((policy, run, str(run_dir), row))
        eff = row["padding_efficiency"]
        say(
            f"[{n}/{total}] {policy:<14} {row['steps']} steps, {row['compiles']} compiles, "
            f"{row['wall_s']:.1f} s wall, {row['tokens_per_s']:.0f} real tokens/s, "
            f"padding efficiency {'-' if eff is None else f'{eff:.2f}'}"
            + (f"  FAILED: {err}" if code else "")
        )
    rows = []
    for (backend, _), (policy, run, path, row) in zip(cases, named, strict=True):
        if run is None:
            row = failed_row(policy, path, failures[policy])
        else:
            row = dict(row)
            if policy in failures:
                row["status"], row["error"] = "failed", failures[policy]
        if backend:
            row["backend"] = backend
        rows.append(row)
    result = {
        "scenario": scenario,
        "steps": steps,
        "args": extra,
        "policies": policies,
        "backends": backends,
        "rows": rows,
        "ratios": backend_ratios(rows, backends, policies) if backends else ratios(rows),
        "failed": sorted(failures),
    }
    (out / COMPARE_JSON).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def backend_ratios(rows: list[dict[str, Any]], backends: list[str],
                   policies: list[str]) -> dict[str, float]:
    """Real tokens/s of each backend over the first backend's, policy by policy; then, inside
    each backend, every policy over its ``longest`` and ``max`` (as :func:`ratios`)."""
    by = {r["policy"]: r for r in rows if r["tokens_per_s"] > 0}
    out: dict[str, float] = {}
    first = backends[0]
    for policy in policies:
        base = by.get(f"{first}/{policy}")
        for b in backends[1:]:
            r = by.get(f"{b}/{policy}")
            if base and r:
                out[f"{b}/{policy} / {first}/{policy}"] = r["tokens_per_s"] / base["tokens_per_s"]
    for b in backends:
        mine = [{**r, "policy": r["policy"].split("/", 1)[1]} for r in rows
                if r.get("backend") == b]
        out.update({f"{b}: {k}": v for k, v in ratios(mine).items()})
    return out


def read_lengths_file(path: Path) -> list[int]:
    """One positive integer per line (blank lines skipped); UsageError naming the bad line."""
    try:
        return read_lengths(path)
    except ValueError as err:
        raise UsageError(str(err)) from None
