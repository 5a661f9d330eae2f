"""``lazyscope compare``: the same scenario under several padding policies, side by side.

Each policy runs as its own ``python -m lazyscope trace SCENARIO --padding POLICY ...``
subprocess, so each starts with an empty XLA compile cache (torch_xla's cache lives for the
whole process: in one process the second policy would reuse the first one's graphs). Every run
directory is kept under ``OUT/<policy>/``; ``OUT/compare.json`` holds the table.

Order: the policies and the scenario's arguments are validated (with the scenario's own parser)
before anything is written; ``OUT`` is never replaced without ``--force``, and then only when it
holds a previous comparison. A policy whose run fails is reported in its row and the others
still run; :func:`run_compare` returns the result and lets the CLI pick the exit code.
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
from lazyscope.errors import LazyscopeError, RunDirError, UsageError
from lazyscope.model import load_run

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


def _validate(scenario: str, policies: list[str], steps: int, extra: list[str]) -> Path:
    from lazyscope.runner import resolve_target, validate_scenario_args

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
) -> dict[str, Any]:
    """Trace ``scenario`` once per policy in fresh processes; return the comparison dict
    (``scenario``, ``steps``, ``args``, ``rows``, ``ratios``, ``failed``) also written to
    ``out/compare.json``."""
    extra = list(extra or [])
    if not policies:
        raise UsageError("no policies to compare")
    _validate(scenario, policies, steps, extra)
    _prepare_out(out, force)
    say = progress or (lambda _line: None)
    env = {**os.environ}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    named = []
    failures: dict[str, str] = {}
    for n, policy in enumerate(policies, 1):
        run_dir = out / policy_slug(policy)
        cmd = [sys.executable, "-m", "lazyscope", "trace", scenario, "--steps", str(steps),
               "--out", str(run_dir), "--padding", policy, *extra]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            (out / f"{policy_slug(policy)}.log").write_text(proc.stdout + proc.stderr,
                                                           encoding="utf-8")
            code, err = proc.returncode, _last_line(proc.stderr or proc.stdout)
        except subprocess.TimeoutExpired:
            code, err = -1, f"timed out after {timeout} s"
        try:
            run = load_run(run_dir)
        except LazyscopeError as exc:
            failures[policy] = err if code else str(exc)
            named.append((policy, None, str(run_dir)))
            say(f"[{n}/{len(policies)}] {policy:<14} FAILED: {failures[policy]}")
            continue
        if code != 0:
            failures[policy] = err
        named.append((policy, run, str(run_dir)))
        row = compare_rows([(policy, run)])[0]
        eff = row["padding_efficiency"]
        say(
            f"[{n}/{len(policies)}] {policy:<14} {row['steps']} steps, {row['compiles']} compiles, "
            f"{row['wall_s']:.1f} s wall, {row['tokens_per_s']:.0f} real tokens/s, "
            f"padding efficiency {'-' if eff is None else f'{eff:.2f}'}"
            + (f"  FAILED: {err}" if code else "")
        )
    rows = []
    for policy, run, path in named:
        if run is None:
            rows.append(failed_row(policy, path, failures[policy]))
        else:
            row = compare_rows([(policy, run)])[0]
            if policy in failures:
                row["status"], row["error"] = "failed", failures[policy]
            rows.append(row)
    result = {
        "scenario": scenario,
        "steps": steps,
        "args": extra,
        "policies": policies,
        "rows": rows,
        "ratios": ratios(rows),
        "failed": sorted(failures),
    }
    (out / COMPARE_JSON).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def load_compare(out: Path) -> dict[str, Any]:
    """Read ``out/compare.json``; RunDirError when missing or corrupt."""
    path = Path(out) / COMPARE_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise RunDirError(f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path} is corrupt: {err}") from None


def read_lengths_file(path: Path) -> list[int]:
    """One positive integer per line (blank lines skipped); UsageError naming the bad line."""
    from lazyscope.scenario_kit import read_lengths

    try:
        return read_lengths(path)
    except ValueError as err:
        raise UsageError(str(err)) from None
