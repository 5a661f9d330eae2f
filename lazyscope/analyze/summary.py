"""Totals, per-step statistics and the one-line verdict of a run.

``summarize(run)`` returns a plain dict (the JSON report's core); ``verdict(summary)`` one line.
Pure functions: no I/O, no printing.
"""

from __future__ import annotations

import statistics
from typing import Any

from lazyscope.model import Run, Step


def _sum(steps: list[Step], attr: str) -> float:
    return sum(getattr(s, attr) for s in steps)


def _merge_counts(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _settling_steps(run: Run, warmup: int) -> list[int]:
    """Steps after warm-up whose only compilations recompiled an identical graph (same graph, same
    input shapes; torch_xla 2.9 does this once, when buffer donation settles)."""
    from lazyscope.analyze.recompiles import explain_recompiles

    settling: set[int] = set()
    counted: set[int] = set()
    for site in explain_recompiles(run):
        for r in site.recompiles:
            if r.step >= warmup:
                (counted if r.counted else settling).add(r.step)
    first = {e.step for e in run.events if e.kind == "compile" and e.step >= warmup}
    explained = settling | counted
    # a step is settling only if every compilation in it is an identical-graph repeat
    return sorted(settling - counted - (first - explained))


def summarize(run: Run) -> dict[str, Any]:
    """The numbers every renderer shares.

    Keys: ``steps``, ``warmup_steps``, ``compiles``, ``compiles_after_warmup``,
    ``recompile_steps`` (steps after warm-up that compiled), ``steps_after_warmup``,
    ``distinct_graphs``, ``compile_seconds``, ``execute_seconds``, ``executions``,
    ``transfers_to_device``, ``transfers_from_device``, ``bytes_to_device``,
    ``bytes_from_device``, ``transfer_from_device_seconds``, ``fallback_ops``,
    ``median_step_seconds`` (after warm-up when there are such steps), ``median_step_seconds_all``,
    ``wall_seconds``, ``status``, ``complete``, ``target``, ``backend``, ``device``, ``warnings``.
    """
    steps = run.steps
    everything = run.all_steps()
    warmup = max(0, int(run.meta.warmup_steps))
    after = [s for s in steps if s.index >= warmup]
    walls_after = [s.wall_s for s in after]
    walls_all = [s.wall_s for s in steps]
    hashes = {h for s in everything for h in s.graph_hashes}
    return {
        "target": run.meta.target,
        "target_kind": run.meta.target_kind,
        "args": run.meta.args,
        "backend": run.meta.backend,
        "device": run.meta.device,
        "versions": run.meta.versions,
        "status": run.status,
        "complete": run.complete,
        "error": run.meta.error,
        "steps": len(steps),
        "warmup_steps": warmup,
        "steps_after_warmup": len(after),
        "compiles": int(_sum(everything, "compile_count")),
        "compiles_after_warmup": int(_sum(after, "compile_count")),
        "recompile_steps": sum(1 for s in after if s.compile_count > 0),
        "settling_recompiles": _settling_steps(run, warmup),
        "distinct_graphs": len(hashes),
        "compile_seconds": _sum(everything, "compile_s"),
        "executions": int(_sum(everything, "execute_count")),
        "execute_seconds": _sum(everything, "execute_s"),
        "transfers_to_device": int(_sum(everything, "to_device_count")),
        "bytes_to_device": int(_sum(everything, "to_device_bytes")),
        "transfers_from_device": int(_sum(everything, "from_device_count")),
        "bytes_from_device": int(_sum(everything, "from_device_bytes")),
        "transfer_from_device_seconds": _sum(everything, "from_device_s"),
        "fallback_ops": _merge_counts([s.fallback_ops for s in everything]),
        "median_step_seconds": statistics.median(walls_after or walls_all) if steps else 0.0,
        "median_step_seconds_all": statistics.median(walls_all) if steps else 0.0,
        "wall_seconds": _sum(everything, "wall_s"),
        "warnings": list(run.warnings),
    }


def verdict(summary: dict[str, Any]) -> str:
    """One line that says what matters most about the run."""
    n_after = summary["steps_after_warmup"]
    recompiled = summary["recompile_steps"]
    prefix = ""
    if not summary["complete"]:
        prefix = f"incomplete run ({summary['steps']} finished steps): "
    elif summary["status"] != "ok":
        prefix = f"run {summary['status']} after {summary['steps']} steps: "
    if summary["steps"] == 0:
        return prefix + "no step finished: nothing reached a step barrier"
    if n_after == 0:
        return prefix + (
            f"only {summary['steps']} warm-up step(s) ran: "
            "run more steps to see steady-state behaviour"
        )
    settling = summary.get("settling_recompiles") or []
    if settling and recompiled == len(settling):
        graphs = summary["compiles"] - len(settling)
        steps = ", ".join(str(s) for s in settling)
        return prefix + (
            f"no shape or code change after warm-up: the graph is static ({graphs} "
            f"compilation{'s' if graphs != 1 else ''} in warm-up, plus a one-off recompilation "
            f"of an identical graph at step {steps}: same graph and input shapes, a torch_xla-internal "
            "difference such as buffer donation)"
        )
    if recompiled == n_after:
        main = (
            f"recompiled on {recompiled} of {n_after} steps after warm-up: "
            "the graph changes every step"
        )
    elif recompiled > 0:
        main = (
            f"recompiled on {recompiled} of {n_after} steps after warm-up "
            f"({summary['compiles_after_warmup']} compilations): some inputs or shapes vary"
        )
    else:
        graphs = summary["compiles"]
        reuse = "the graph is static" if summary["backend"] == "xla" else "compiled code is reused"
        main = (
            f"no recompilation after warm-up: {reuse} "
            f"({graphs} compilation{'s' if graphs != 1 else ''} in warm-up)"
        )
    extras = []
    fallbacks = summary["fallback_ops"]
    if fallbacks:
        extras.append(f"{sum(fallbacks.values())} CPU fallback op executions ({', '.join(fallbacks)})")
    if summary["transfers_from_device"]:
        extras.append(f"{summary['transfers_from_device']} device-to-host transfers")
    return prefix + main + (f"; {'; '.join(extras)}" if extras else "")
