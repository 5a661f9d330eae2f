"""The text report: header, totals, a per-step table, and the verdict as the last line."""

from __future__ import annotations

from typing import Any

from lazyscope.analyze.summary import summarize, verdict
from lazyscope.model import Run, Step

MAX_TABLE_ROWS = 40


def fmt_bytes(n: float) -> str:
    """Human-readable bytes (B, KiB, MiB, GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def fmt_seconds(s: float) -> str:
    """Seconds with a unit that keeps 3 significant digits."""
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def _step_rows(steps: list[Step]) -> list[str]:
    rows = [f"  {'step':>5} {'wall':>10} {'compiles':>8} {'compile':>10} {'execs':>5} "
            f"{'to dev':>6} {'from dev':>8} {'fallbacks':>9}"]
    shown: list[Step | None] = list(steps)
    if len(steps) > MAX_TABLE_ROWS:
        half = MAX_TABLE_ROWS // 2
        shown = steps[:half] + [None] + steps[-half:]
    for s in shown:
        if s is None:
            rows.append(f"  {'...':>5}")
            continue
        rows.append(
            f"  {s.index:>5} {fmt_seconds(s.wall_s):>10} {s.compile_count:>8} "
            f"{fmt_seconds(s.compile_s) if s.compile_count else '-':>10} {s.execute_count:>5} "
            f"{s.to_device_count:>6} {s.from_device_count:>8} {sum(s.fallback_ops.values()):>9}"
        )
    return rows


def render_summary_text(run: Run, summary: dict[str, Any]) -> list[str]:
    """The header and totals block."""
    target = summary["target"] + (" " + " ".join(summary["args"]) if summary["args"] else "")
    versions = ", ".join(f"{k} {v}" for k, v in summary["versions"].items())
    status = summary["status"]
    if summary["error"]:
        status += f": {summary['error']}"
    fallbacks = summary["fallback_ops"]
    lines = [
        f"lazyscope report: {run.path}",
        f"  target      {summary['target_kind']} {target}",
        f"  backend     {summary['backend']} on {summary['device'] or '?'} ({versions})",
        f"  status      {status}",
    ]
    for w in summary["warnings"]:
        lines.append(f"  warning     {w}")
    for note in run.meta.info.get("notes", []) or []:
        lines.append(f"  note        {note}")
    lines += [
        "",
        f"  steps           {summary['steps']} (first {summary['warmup_steps']} are warm-up)",
        f"  median step     {fmt_seconds(summary['median_step_seconds'])} after warm-up"
        if summary["steps_after_warmup"]
        else f"  median step     {fmt_seconds(summary['median_step_seconds'])}",
        f"  wall            {fmt_seconds(summary['wall_seconds'])}",
        f"  compilations    {summary['compiles']} ({summary['compiles_after_warmup']} after "
        f"warm-up, {summary['distinct_graphs']} distinct graphs), "
        f"{fmt_seconds(summary['compile_seconds'])}",
        f"  executions      {summary['executions']}, {fmt_seconds(summary['execute_seconds'])}",
        f"  to device       {summary['transfers_to_device']} transfers, "
        f"{fmt_bytes(summary['bytes_to_device'])}",
        f"  from device     {summary['transfers_from_device']} transfers, "
        f"{fmt_bytes(summary['bytes_from_device'])}, "
        f"{fmt_seconds(summary['transfer_from_device_seconds'])}",
        "  CPU fallbacks   "
        + (", ".join(f"{op} x{n}" for op, n in fallbacks.items()) if fallbacks else "none"),
    ]
    return lines


def render_text(run: Run) -> str:
    summary = summarize(run)
    lines = render_summary_text(run, summary)
    if run.steps:
        lines += ["", *_step_rows(run.steps)]
    lines += _event_rows(run)
    lines += render_findings_text(run)
    lines += _bucket_advice_lines(run, summary)
    lines += ["", f"verdict: {verdict(summary)}"]
    return "\n".join(lines) + "\n"


def _event_rows(run: Run) -> list[str]:
    """Compilations, graph breaks and host syncs grouped by site and cause (both backends)."""
    from lazyscope.analyze.events import event_groups

    groups = event_groups(run)
    if not groups:
        return []
    rows = ["", "  events (kind x count at site: cause; steps)"]
    for g in groups[:MAX_TABLE_ROWS]:
        steps = ",".join(str(s) for s in g["steps"][:12]) + (",..." if len(g["steps"]) > 12 else "")
        rows.append(f"  {g['kind']:<16} x{g['count']:<3} at {g['site']}: {g['cause']} "
                    f"(steps {steps})")
    if len(groups) > MAX_TABLE_ROWS:
        rows.append(f"  ... {len(groups) - MAX_TABLE_ROWS} more groups in events.jsonl")
    return rows


def render_findings_text(run: Run) -> list[str]:
    """Findings ranked by estimated time, each with its fix (issue 4)."""
    from lazyscope.analyze.findings import findings

    found = findings(run)
    if not found:
        return ["", "findings: none after warm-up"]
    lines = ["", f"findings ({len(found)}, most expensive first):"]
    for i, f in enumerate(found, start=1):
        where = f"{f['file']}:{f['line']}" if f["file"] else "unknown line"
        lines.append(f"  {i}. [{f['kind']}] {where} x{f['count']}, ~{fmt_seconds(f['seconds'])}")
        lines.append(f"     {f['detail']}")
        lines.append(f"     fix: {f['fix']}")
    return lines


def _bucket_advice_lines(run: Run, summary: dict[str, Any]) -> list[str]:
    """Bucket advice (issue 3) for runs that recompile on a varying sequence length."""
    from lazyscope.analyze.buckets import advice_if_recompiling

    advice = advice_if_recompiling(run)
    if advice is None:
        return []
    n_shapes = advice["seq_len_values"]
    best = advice["best"]
    wins = [a["name"] for a in advice["alternatives"] if a.get("wins")]
    return [
        "",
        f"bucket advice: the padded sequence length took {n_shapes} values; "
        f"{best['buckets']} bucket(s) {best['boundaries']} predict "
        f"{fmt_seconds(best['predicted_total'])} over {advice['horizon']} steps "
        f"(padding efficiency {best['padding_efficiency']:.2f})"
        + (f"; better still: {', '.join(wins)}" if wins else "")
        + f" (lazyscope advise {run.path} for the table)",
    ]
