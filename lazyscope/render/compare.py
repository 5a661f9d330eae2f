"""Rendering a comparison (:class:`~lazyscope.analyze.compare.Comparison`).

* ``render_compare_text(result) -> str``: the table, the ratios and the verdict line.
* its picture is :func:`lazyscope.render.plots.write_compare_png`. With ``result.backends``
  (``compare --backends``) rows are ``backend/policy``: one table and one picture across
  backends.
* ``compare_page(result, images, where=...) -> str``: the comparison's HTML page (the verdict:
  which policy wins and by how much; the table with units; the pictures), built with
  :mod:`lazyscope.render.html`'s helpers.

The advisor's answer is :mod:`lazyscope.render.advice`'s.
"""

from __future__ import annotations

from typing import Any

from lazyscope.analyze.compare import CompareRow, Comparison, Verdict
from lazyscope.core.units import nbytes
from lazyscope.render.html import esc, img, page, table
from lazyscope.render.plots import compiles_text, efficiency_text, row_label


def verdict_text(verdict: Verdict | None) -> str:
    """One line: the fastest policy end to end, its numbers, and by how much it beats each
    other one."""
    if verdict is None:
        return "no policy ran: nothing to compare"
    best = verdict.best
    over = ", ".join(f"{ratio:.2f}x {name}" for name, ratio in verdict.margins)
    noise = ", ".join(name for name, _ in verdict.noise)
    spread = ("not measured: --repeat N measures it" if verdict.spread is None
              else f"{verdict.spread:.0%} between repeats")
    if not verdict.margins and verdict.noise:
        lead = (f"no policy wins: {row_label(best)} and {noise} differ by measurement noise "
                f"(run-to-run spread {spread})")
    else:
        lead = (f"{row_label(best)} is fastest end to end: {best.tokens_per_s:,.0f} real tokens/s "
                f"(compilation included; {compiles_text(best.compiles)}, padding efficiency "
                f"{efficiency_text(best.padding_efficiency)})" + (f"; {over}" if over else "")
                + (f"; {noise}: the same as it within noise" if noise else "")
                + ("" if verdict.spread is not None else f" (run-to-run spread {spread})"))
    return lead + (f"; failed: {', '.join(verdict.failed)}" if verdict.failed else "")


def render_compare_text(result: Comparison) -> str:
    rows = result.rows
    args = " ".join(result.args)
    backends = result.backends
    w = max([16, *(len(row_label(r)) + 1 for r in rows)])
    what = "each backend x policy" if backends else "each policy"
    if result.repeat > 1:
        what += f" x {result.repeat} rounds"
    lines = [
        f"lazyscope compare: {result.scenario} {args} ({result.steps} steps, {what} "
        "in a fresh process)" + (f"; backends {', '.join(backends)}" if backends else ""),
        "",
        f"  {'backend/policy' if backends else 'policy':<{w}} {'compiles':>8} {'graphs':>6} "
        f"{'compile s':>10} {'execute s':>10} {'wall s':>8} {'real tok/s':>11} {'graph mem':>10} "
        f"{'pad eff':>8}  status",
    ]
    for r in rows:
        status = r.status + (f": {r.error}" if r.error else "")
        lines.append(
            f"  {row_label(r):<{w}} {r.compiles:>8} {r.distinct_graphs:>6} "
            f"{r.compile_s:>10.2f} {r.execute_s:>10.2f} {r.wall_s:>8.2f} "
            f"{r.tokens_per_s:>11,.0f} {_graph_mem(r):>10} "
            f"{efficiency_text(r.padding_efficiency):>8}  {status}"
        )
    repeats = [r for r in rows if len(r.repeats) > 1]
    if repeats:
        lines += ["", f"  {result.repeat} rounds in alternating order; each row is its median run. "
                  "real tok/s of every round:"]
        lines += [f"    {row_label(r):<{w}} " + ", ".join(f"{v:,.0f}" for v in r.repeats)
                  for r in repeats]
    buckets = [(r.policy, r.buckets) for r in rows if r.buckets]
    if buckets:
        lines += ["", "  buckets: " + "; ".join(f"{p} {b}" for p, b in buckets)]
    if result.ratios:
        lines += ["", "  real tokens/s including compilation, ratios:"]
        kw = max([28, *(len(k) for k in result.ratios)])
        lines += [f"    {k:<{kw}} {v:6.2f}x" for k, v in result.ratios.items()]
    lines += [f"  note: {n}" for n in same_run_notes(result)]
    lines += ["", f"verdict: {verdict_text(result.verdict)}"]
    return "\n".join(lines) + "\n"


def _graph_mem(r: CompareRow) -> str:
    """The row's largest compiled graph; "-" where its backend does not measure it."""
    return "-" if r.graph_memory is None else nbytes(r.graph_memory)


def same_run_notes(result: Comparison) -> list[str]:
    """One line per group of rows that ran the same policy: their spread is this machine's
    noise, the yardstick for every other difference in the table."""
    out = []
    for group in result.same_runs():
        fast = max(r.tokens_per_s for r in group)
        slow = min(r.tokens_per_s for r in group)
        what = (f"the same padded shapes ({_shapes(group[0].shapes)})" if group[0].shapes
                else f"the same policy ({group[0].ran})")
        out.append(f"{' and '.join(r.policy for r in group)} ran {what}: {fast:,.0f} vs "
                   f"{slow:,.0f} real tokens/s is measurement noise ({fast / slow - 1:.0%})")
    return out


def _shapes(shapes: tuple[int, ...]) -> str:
    return (", ".join(str(x) for x in shapes) if len(shapes) <= 4
            else f"{len(shapes)} lengths in {shapes[0]}..{shapes[-1]}")


# ------------------------------------------------------------------------------ the page

COMPARE_COLUMNS = ["policy", "ran", "status", "steps", "compiles", "graphs", "compile_s",
                   "execute_s", "wall_s", "real_tokens", "tokens_per_sec", "graph_memory",
                   "padding_efficiency", "buckets"]
COMPARE_HEADERS = {"policy": "policy", "ran": "ran", "status": "status", "steps": "steps",
                   "compiles": "compiles", "graphs": "distinct graphs",
                   "compile_s": "compiling", "execute_s": "executing", "wall_s": "wall",
                   "real_tokens": "real tokens", "tokens_per_sec": "real tokens/s",
                   "graph_memory": "largest graph",
                   "padding_efficiency": "padding efficiency", "buckets": "padded to",
                   "repeats": "real tokens/s of each round"}


def _page_row(r: CompareRow) -> dict[str, Any]:
    """A row's cells, typed so that :func:`~lazyscope.render.html.table` formats each with its
    unit: seconds as seconds, counts as integers, tokens/s as an integer count."""
    return {"policy": r.policy, "ran": r.resolved or "", "status": r.status + (
                f": {r.error}" if r.error else ""),
            "steps": r.steps, "compiles": r.compiles, "graphs": r.distinct_graphs,
            "compile_s": r.compile_s, "execute_s": r.execute_s, "wall_s": r.wall_s,
            "real_tokens": r.real_tokens, "tokens_per_sec": round(r.tokens_per_s),
            "graph_memory": _graph_mem(r),
            "padding_efficiency": None if r.padding_efficiency is None
            else round(r.padding_efficiency, 2),
            "buckets": ", ".join(str(b) for b in r.buckets) if r.buckets else "",
            "repeats": ", ".join(f"{v:,.0f}" for v in r.repeats)}


def _columns(result: Comparison) -> list[str]:
    return COMPARE_COLUMNS + (["repeats"] if result.repeat > 1 else [])


def compare_page(result: Comparison, images: dict[str, bytes] | None = None, *,
                 where: str = "", fragment: bool = False) -> str:
    """The comparison's page: heading, the verdict, the table (units in every cell), the
    ratios, the pictures. Pure."""
    args = " ".join(result.args)
    per = "backend x policy" if result.backends else "policy"
    head = (f"<h1>lazyscope compare: {esc(result.scenario)}</h1>"
            f'<div class="sub">{esc(args) + " &middot; " if args else ""}'
            f"{result.steps} steps per {per}, each in a fresh process"
            + (f", {result.repeat} rounds (each row: its median run)" if result.repeat > 1
               else "")
            + (f" &middot; backends {esc(', '.join(result.backends))}" if result.backends else "")
            + (f" &middot; <code>{esc(where)}</code>" if where else "") + "</div>")
    verdict = result.verdict
    ok = verdict is not None and not result.failed
    parts = [head, f'<div class="verdict{" ok" if ok else ""}">'
             f"{esc(verdict_text(verdict))}</div>"]
    parts.append("<h2>Policies</h2>")
    parts.append(table([_page_row(r) for r in result.rows], _columns(result), COMPARE_HEADERS))
    parts.append('<p class="sub">real tokens/s: the tokens of the documents over the wall time '
                 "of the whole run, compilation included; padding efficiency: real over "
                 "computed tokens. Each policy's run is kept under its own directory "
                 "(<code>lazyscope report DIR/POLICY --format html</code> draws it).</p>")
    notes = same_run_notes(result)
    if notes:
        parts.append("".join(f'<p class="sub">note: {esc(n)}</p>' for n in notes))
    if result.ratios:
        parts.append("<h2>Ratios of real tokens/s</h2>")
        parts.append(table([{"ratio": k, "value": f"{v:.2f}x"} for k, v in
                            result.ratios.items()], ["ratio", "value"]))
    if images:
        parts.append("<h2>Pictures</h2>")
        parts += [img(png, alt=name, caption=name) for name, png in images.items()]
    return page(f"lazyscope compare: {result.scenario}", "".join(parts), fragment=fragment)
