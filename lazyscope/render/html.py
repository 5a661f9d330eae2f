"""The HTML report: one self-contained file (``RUN/report.html``).

Self-contained means: CSS inline, every picture an inline ``data:image/png;base64`` URI, no
script, no font, nothing fetched from the network; the file can be mailed or opened offline.

Contract:

* ``build_html(report, images) -> str`` is pure: it renders whatever the report dict
  (``render.json.report_dict``) holds. Sections whose data is absent are left out: ``verdict``,
  the totals, ``findings`` and ``notes`` (kind, line, stack, compiled_at, changes, count,
  seconds, detail, fix; ranked by seconds), pictures, compilations, host syncs, CPU fallbacks
  and graph breaks (from ``events``), ``advice`` and ``compare`` (a dict whose lists of dicts
  become tables, with a ``compare.png``-style picture), ranks (a multi-process run).
* ``render_html(report, images) -> str`` does it for a :class:`Report`; the files are written by
  :mod:`lazyscope.render.views`.
* Everything from the user (paths, arguments, messages) is escaped.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lazyscope.render.json import report_dict

REPORT_HTML = "report.html"
MAX_ROWS = 200

#: every rule is scoped to the report's wrapper, so the report can sit inside another page (a
#: notebook's output) without restyling it
SCOPE = "lazyscope-report"
CSS = """
.lazyscope-report{font:14px/1.45 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
 color:#1d2330;background:#f6f7f9;text-align:left}
.lazyscope-report main{max-width:1080px;margin:0 auto;padding:24px}
.lazyscope-report h1{font-size:22px;margin:0 0 4px}
.lazyscope-report h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde;
 padding-bottom:4px}
.lazyscope-report .sub{color:#5b6475;font-size:13px}
.lazyscope-report .verdict{background:#fff;border-left:5px solid #d62728;padding:12px 16px;
 margin:16px 0;font-size:16px;box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report .verdict.ok{border-left-color:#2ca02c}
.lazyscope-report .cards{display:flex;flex-wrap:wrap;gap:10px}
.lazyscope-report .card{background:#fff;padding:10px 14px;min-width:140px;
 box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report .card b{display:block;font-size:18px}
.lazyscope-report .card span{color:#5b6475;font-size:12px}
.lazyscope-report table{border-collapse:collapse;background:#fff;width:100%;font-size:13px;
 box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report th,.lazyscope-report td{border-bottom:1px solid #e6e8ee;padding:5px 8px;
 text-align:left;vertical-align:top}
.lazyscope-report th{background:#eef0f4;font-weight:600}
.lazyscope-report td.n{text-align:right;font-variant-numeric:tabular-nums}
.lazyscope-report code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#eef0f4;
 padding:1px 4px}
.lazyscope-report figure{margin:12px 0;background:#fff;padding:8px;
 box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report figure img{max-width:100%;height:auto;display:block}
.lazyscope-report figcaption{color:#5b6475;font-size:12px}
.lazyscope-report .finding{background:#fff;padding:10px 14px;margin:8px 0;
 box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report .finding h3{margin:0 0 4px;font-size:15px}
.lazyscope-report .fix{color:#1a7f37}
.lazyscope-report .rank{display:inline-block;background:#1d2330;color:#fff;border-radius:10px;
 padding:0 8px;margin-right:6px;font-size:12px}
.lazyscope-report details summary{cursor:pointer;color:#3451b2}
.lazyscope-report .warn{color:#9a6700}
"""

FINDING_KEYS = ("kind", "file", "line", "function", "count", "seconds", "detail", "fix",
                "stack", "steps", "step_count", "compiled_at", "changes")


def esc(value: Any) -> str:
    """HTML-escaped text of any value."""
    return html.escape("" if value is None else str(value), quote=True)


def fmt_seconds(s: Any) -> str:
    try:
        x = float(s)
    except (TypeError, ValueError):
        return esc(s)
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} us"


def fmt_cell(key: str, value: Any) -> tuple[str, bool]:
    """(escaped text, is it a number) for a table cell."""
    if isinstance(value, bool) or value is None:
        return esc("-" if value is None else value), False
    if isinstance(value, float):
        if key.endswith("_s") or key.endswith("seconds") or key == "seconds":
            return fmt_seconds(value), True
        return (f"{value:.3g}" if abs(value) < 1e4 else f"{value:,.0f}"), True
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        return esc(", ".join(str(v) for v in value)), False
    if isinstance(value, (dict, list, tuple)):
        return f"<code>{esc(json.dumps(value, default=str))}</code>", False
    return esc(value), False


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
          headers: Mapping[str, str] | None = None, max_rows: int = MAX_ROWS) -> str:
    """A table of dicts: columns in the given order, or the union of keys in first-seen order."""
    if not rows:
        return ""
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            for k in row:
                seen.setdefault(k, None)
        columns = list(seen)
    headers = headers or {}
    out = ["<table><thead><tr>"]
    out += [f"<th>{esc(headers.get(c, c))}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for row in rows[:max_rows]:
        out.append("<tr>")
        for c in columns:
            text, numeric = fmt_cell(c, row.get(c))
            out.append(f'<td class="n">{text}</td>' if numeric else f"<td>{text}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if len(rows) > max_rows:
        out.append(f'<p class="sub">{len(rows) - max_rows} more rows not shown</p>')
    return "".join(out)


def img(png: bytes, alt: str, caption: str = "") -> str:
    """A figure with the PNG inline as a data URI."""
    data = base64.b64encode(png).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">{cap}</figure>'


def _value_html(value: Any) -> str:
    """Any JSON-like value: a list of dicts becomes a table, a dict a key/value table."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return table(value)
    if isinstance(value, Mapping):
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_value_html(v)}</td></tr>"
                       for k, v in value.items())
        return f"<table>{rows}</table>"
    return fmt_cell("", value)[0]


ADVICE_COLUMNS = ["name", "boundaries", "graphs", "padding_efficiency", "predicted_compile",
                  "predicted_execute", "predicted_total"]


def _advice(advice: Mapping[str, Any]) -> str:
    """Bucket advice: the recommendation in one line, then every option the advisor priced
    (each K of the exact DP, pow2, pad-to-max, and grouped batching or packing when they win);
    anything else the advice holds, generically."""
    options = list(advice.get("per_k") or [])
    options += [advice[k] for k in ("pow2", "max") if isinstance(advice.get(k), Mapping)]
    options += [a for a in advice.get("alternatives") or [] if a.get("wins")]
    best = advice.get("best")
    if not options or not isinstance(best, Mapping):
        return _value_html(advice)
    head = (f"<p><b>{esc(best.get('name', ''))}</b>: boundaries "
            f"<code>{esc(best.get('boundaries'))}</code>, predicted "
            f"{esc(fmt_seconds(float(best.get('predicted_total', 0.0))))} over "
            f"{esc(advice.get('horizon'))} steps, padding efficiency "
            f"{float(best.get('padding_efficiency', 0.0)):.2f} (histogram of "
            f"{esc(advice.get('histogram_of', 'lengths'))}; "
            f"<code>lazyscope advise RUN</code> for more)</p>")
    rows = [{**o, "boundaries": ", ".join(str(b) for b in o.get("boundaries") or [])}
            for o in options]
    return head + table(rows, columns=ADVICE_COLUMNS)


def _section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>' if body else ""


def _cards(report: Mapping[str, Any]) -> str:
    items = [
        ("steps", report.get("steps"), None),
        ("median step", report.get("median_step_seconds"), fmt_seconds),
        ("wall", report.get("wall_seconds"), fmt_seconds),
        ("compilations", report.get("compiles"), None),
        ("compiling", report.get("compile_seconds"), fmt_seconds),
        ("distinct graphs", report.get("distinct_graphs"), None),
        ("executing", report.get("execute_seconds"), fmt_seconds),
        ("device-to-host transfers", report.get("transfers_from_device"), None),
        ("host syncs", report.get("syncs"), None),
        ("graph breaks", report.get("graph_breaks") or None, None),
    ]
    cards = [f'<div class="card"><b>{f(v) if f else esc(v)}</b><span>{esc(label)}</span></div>'
             for label, v, f in items if v is not None]
    return f'<div class="cards">{"".join(cards)}</div>' if cards else ""


def _frame_text(f: Any) -> str:
    if isinstance(f, Mapping):
        return f"{f.get('file', '')}:{f.get('line', '')}" + (
            f" ({f.get('function')})" if f.get("function") else "")
    return str(f)


def _findings(findings: Iterable[Mapping[str, Any]]) -> str:
    ranked = sorted(
        (f for f in findings if isinstance(f, Mapping)),
        key=lambda f: -float(f.get("seconds") or 0.0),
    )
    out = []
    for i, f in enumerate(ranked, 1):
        where = ""
        if f.get("file"):
            where = f" at <code>{esc(f['file'])}{':' + esc(f['line']) if f.get('line') else ''}</code>"
        stats = []
        if f.get("count") is not None:
            stats.append(f"{esc(f['count'])}x")
        if f.get("seconds"):
            stats.append(fmt_seconds(f["seconds"]))
        extra = {k: v for k, v in f.items() if k not in FINDING_KEYS and k != "title"}
        title = f.get("title") or f.get("kind") or "finding"
        context = []
        compiled = f.get("compiled_at")
        if isinstance(compiled, Mapping) and (compiled.get("file"), compiled.get("line")) != (
                f.get("file"), f.get("line")):
            context.append(f"compiled at <code>{esc(_frame_text(compiled))}</code>")
        stack = f.get("stack") or []
        if len(stack) > 1:
            context.append("called from " + " &larr; ".join(
                f"<code>{esc(_frame_text(fr))}</code>" for fr in stack[1:5]))
        changes = f.get("changes") or []
        out.append(
            f'<div class="finding"><h3><span class="rank">{i}</span>{esc(title)}{where}'
            f'{" &middot; " + ", ".join(stats) if stats else ""}</h3>'
            + "".join(f'<div class="sub">{c}</div>' for c in context)
            + (f"<div>{esc(f['detail'])}</div>" if f.get("detail") else "")
            + (f'<div class="fix">fix: {esc(f["fix"])}</div>' if f.get("fix") else "")
            + (f"<details><summary>what changed ({len(changes)})</summary>"
               f"{table(changes)}</details>" if changes else "")
            + (f"<details><summary>more</summary>{_value_html(extra)}</details>" if extra else "")
            + "</div>"
        )
    return "".join(out)


def _compilations(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    cols = ["step", "seconds", "graph", "phase", "cause", "owner", "site"]
    heads = {"graph": "graph id", "site": "user site"}
    return table(rows, cols, heads)


def _groups(report: Mapping[str, Any], *kinds: str) -> list[dict[str, Any]]:
    return [dict(g) for g in report.get("events") or []
            if str(g.get("kind", "")).split(" ")[0] in kinds]


def build_html(report: Mapping[str, Any], images: Mapping[str, bytes] | None = None, *,
               fragment: bool = False) -> str:
    """The page for a report dict (``fragment``: to embed, see :func:`page`). ``images``:
    caption -> PNG bytes, shown in order."""
    images = images or {}
    title = " ".join([str(report.get("target", "")), *map(str, report.get("args") or [])]).strip()
    head = (
        f"<h1>lazyscope report{': ' + esc(title) if title else ''}</h1>"
        f'<div class="sub">{esc(report.get("target_kind", ""))} &middot; backend '
        f'{esc(report.get("backend", "?"))} on {esc(report.get("device") or "?")} &middot; '
        f'status {esc(report.get("status", "?"))}'
        + (f" &middot; {esc(report['error'])}" if report.get("error") else "")
        + (f" &middot; <code>{esc(report['run_dir'])}</code>" if report.get("run_dir") else "")
        + "</div>"
    )
    parts = [head]
    for w in report.get("warnings") or []:
        parts.append(f'<p class="warn">warning: {esc(w)}</p>')
    for n in report.get("run_notes") or []:
        parts.append(f'<p class="sub">note: {esc(n)}</p>')
    if report.get("verdict"):
        ok = bool(report.get("clean"))
        parts.append(f'<div class="verdict{" ok" if ok else ""}">{esc(report["verdict"])}</div>')
    parts.append(_cards(report))
    if report.get("ranks"):
        parts.append(_section("Ranks", table(list(report["ranks"])), "ranks"))
    parts.append(_section("Findings, worst first", _findings(report.get("findings") or []),
                          "findings"))
    parts.append(_section("Notes: one-offs, not findings", _findings(report.get("notes") or []),
                          "notes"))
    pictures = "".join(img(png, alt=name, caption=name) for name, png in images.items())
    parts.append(_section("Steps", pictures, "plots"))
    comp_rows = list(report.get("compilations") or [])
    total = report.get("compilations_total", len(comp_rows))
    parts.append(_section(f"Compilations ({total})", _compilations(comp_rows), "compilations"))
    syncs = _groups(report, "sync")
    parts.append(_section(f"Host syncs ({sum(g['count'] for g in syncs)})", table(syncs),
                          "syncs"))
    fb = report.get("fallback_ops") or {}
    fb_body = table([{"op": op, "executions": n} for op, n in fb.items()]) if fb else ""
    fb_body += table(_groups(report, "fallback"))
    parts.append(_section("CPU fallbacks", fb_body, "fallbacks"))
    breaks = _groups(report, "graph_break", "eager_fallback")
    parts.append(_section("Graph breaks and eager fallbacks", table(breaks), "breaks"))
    advice = report.get("advice")
    if advice:
        parts.append(_section("Bucket advice", _advice(advice), "advice"))
    compare = report.get("compare")
    if compare:
        parts.append(_section("Comparison", _value_html(compare), "compare"))
    per_step = report.get("per_step") or []
    if per_step:
        what = ("buckets of steps" if report.get("per_step_bucketed") else "steps")
        parts.append(_section(
            "Per step",
            f"<details><summary>{len(per_step)} {what}</summary>"
            f"{table(per_step, max_rows=10_000)}</details>",
            "per-step",
        ))
    return page(f"lazyscope: {title or 'report'}", "".join(p for p in parts if p),
                fragment=fragment)


def page(title: str, body: str, *, fragment: bool = False) -> str:
    """``body`` (HTML) as a whole self-contained page, or as a fragment to embed in another page
    (a notebook's output: no document, no global style; every rule is scoped to the wrapper)."""
    inner = f'<div class="{SCOPE}"><style>{CSS}</style><main>{body}</main></div>'
    if fragment:
        return inner
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>body{{margin:0;background:#f6f7f9}}</style></head>"
        f"<body>{inner}</body></html>\n"
    )


def render_html(report: Any, images: Mapping[str, bytes] | None = None, *,
                fragment: bool = False) -> str:
    """The report page of a :class:`~lazyscope.analyze.report.Report` (with the plots as PNG
    bytes, written by :mod:`lazyscope.render.views`); ``fragment``: to embed in a notebook."""
    return build_html(report_dict(report), images, fragment=fragment)


def write_compare_html(compare_dir: Path, compare: Mapping[str, Any] | None = None) -> Path:
    """Write ``DIR/report.html`` for a ``lazyscope compare`` directory: the side-by-side table
    (``compare.json``: rows, ratios ...) and ``compare.png`` inline. Returns its path."""
    compare_dir = Path(compare_dir)
    if compare is None:
        compare = json.loads((compare_dir / "compare.json").read_text(encoding="utf-8"))
    images = {}
    png = compare_dir / "compare.png"
    if png.is_file():
        images["policies compared"] = png.read_bytes()
    report = {"target": f"compare {compare.get('scenario', '')}".strip(),
              "args": list(compare.get("args") or []), "target_kind": "comparison",
              "run_dir": str(compare_dir), "compare": dict(compare)}
    path = compare_dir / REPORT_HTML
    path.write_text(build_html(report, images), encoding="utf-8")
    return path
