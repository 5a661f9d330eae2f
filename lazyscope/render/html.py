"""The HTML report: one self-contained file (``RUN/report.html``), or a fragment to embed.

Self-contained means: CSS inline (scoped to ``.lazyscope-report``), every picture an inline
``data:image/png;base64`` URI, no script, no font, nothing fetched from the network; the file
can be mailed or opened offline, and the fragment (``fragment=True``) sits in a notebook's
output without restyling the page.

Contract:

* ``render_html(report, images, fragment=False) -> str`` renders the typed
  :class:`~lazyscope.analyze.report.Report` (its fields, never a dict of it): the verdict, the
  totals, the findings and notes (kind, line, stack, where a cost inside a library happens,
  what changed, how often each graph ran, detail, fix), the plots, the compilations, host
  syncs, CPU fallbacks, graph breaks, advice, ranks, and the per-step table. A section whose
  data the run does not have is left out; a table longer than :data:`FOLD_ROWS` rows shows its
  first rows and folds the rest (with their count); a structured value (a frame, a change, a
  list) is written as text.
* ``page(title, body, fragment=...)``, ``table``, ``img``, ``esc``: the building blocks other
  pages (the compare page) use.
* The files are written by :mod:`lazyscope.render.views`. Everything from the user (paths,
  arguments, messages) is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lazyscope.analyze.buckets import Advice
from lazyscope.analyze.compilebill import bill_lines
from lazyscope.analyze.findings import (
    Finding,
    RecompileFacts,
    ReuseFacts,
    SyncFacts,
    VaryingInput,
)
from lazyscope.analyze.report import Report
from lazyscope.core import units
from lazyscope.model import Change, Frame
from lazyscope.render.json import to_jsonable
from lazyscope.render.text import finding_cost

#: rows a table shows before it folds the rest
FOLD_ROWS = 20
MAX_ROWS = 2000

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
.lazyscope-report td{overflow-wrap:anywhere}
.lazyscope-report td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;
 overflow-wrap:normal}
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
.lazyscope-report .anatomy{background:#fff;padding:10px 14px;margin:12px 0;
 box-shadow:0 1px 2px rgba(0,0,0,.06)}
.lazyscope-report .bar{display:flex;height:26px;margin:6px 0;border-radius:3px;overflow:hidden}
.lazyscope-report .bar span{display:block;color:#fff;font-size:12px;line-height:26px;
 padding-left:6px;white-space:nowrap;overflow:hidden}
.lazyscope-report .legend span{display:inline-block;margin-right:14px;font-size:12px}
.lazyscope-report .legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
"""

#: the step anatomy's parts in the order the bar draws them, with the plots' colours
ANATOMY_COLOURS = {"input": "#9467bd", "host": "#7f7f7f", "compile": "#d62728",
                   "device": "#1f77b4", "syncs": "#ff7f0e", "other": "#bcbd22"}


def esc(value: Any) -> str:
    """HTML-escaped text of any value."""
    return html.escape("" if value is None else str(value), quote=True)


def text_of(value: Any) -> str:
    """A value as text for a cell: a frame as ``file:line (function)``, a change as ``what:
    before -> after``, a list joined, a mapping as ``key value`` pairs; never JSON."""
    if value is None:
        return "-"
    if isinstance(value, Frame):
        return str(value)
    if isinstance(value, Change):
        return _change_text(value)
    if isinstance(value, Mapping):
        if {"file", "line"} <= set(value):
            fn = value.get("function")
            return f"{value['file']}:{value['line']}" + (f" ({fn})" if fn else "")
        return ", ".join(f"{k} {text_of(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(text_of(v) for v in value)
    return str(value)


def fmt_cell(key: str, value: Any) -> tuple[str, bool]:
    """(escaped text, is it a number) for a table cell."""
    if isinstance(value, bool) or value is None:
        return esc("-" if value is None else value), False
    if isinstance(value, float):
        if key.endswith("_s") or key.endswith("seconds") or key == "seconds":
            return esc(units.seconds(value)), True
        if key == "share" or key.endswith("_share"):  # a fraction, shown as a percentage
            return f"{value:.0%}", True
        return (f"{value:.3g}" if abs(value) < 1e4 else f"{value:,.0f}"), True
    if isinstance(value, int):
        return f"{value:,}", True
    return esc(text_of(value)), False


def _rows_html(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    out = []
    for row in rows:
        out.append("<tr>")
        for c in columns:
            text, numeric = fmt_cell(c, row.get(c))
            out.append(f'<td class="n">{text}</td>' if numeric else f"<td>{text}</td>")
        out.append("</tr>")
    return "".join(out)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
          headers: Mapping[str, str] | None = None, max_rows: int = MAX_ROWS,
          fold: int = FOLD_ROWS) -> str:
    """A table of mappings (columns in the given order, or the union of keys in first-seen
    order); past ``fold`` rows the rest is folded under a summary that counts them, past
    ``max_rows`` rows dropped with a line that says how many."""
    if not rows:
        return ""
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            for k in row:
                seen.setdefault(k, None)
        columns = list(seen)
    headers = headers or {}
    head = "<thead><tr>" + "".join(f"<th>{esc(headers.get(c, c))}</th>" for c in columns) + \
        "</tr></thead>"
    shown = list(rows[:max_rows])
    out = [f"<table>{head}<tbody>{_rows_html(shown[:fold], columns)}</tbody></table>"]
    if len(shown) > fold:
        out.append(f"<details><summary>{len(shown) - fold} more rows</summary>"
                   f"<table>{head}<tbody>{_rows_html(shown[fold:], columns)}</tbody></table>"
                   "</details>")
    if len(rows) > max_rows:
        out.append(f'<p class="sub">{len(rows) - max_rows} more rows not shown '
                   "(lazyscope report RUN --format json has them)</p>")
    return "".join(out)


def img(png: bytes, alt: str, caption: str = "") -> str:
    """A figure with the PNG inline as a data URI."""
    data = base64.b64encode(png).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">{cap}</figure>'


def section(title: str, body: str, anchor: str) -> str:
    """A titled section, or nothing when ``body`` is empty."""
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>' if body else ""


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


# --------------------------------------------------------------------------- the report


def _change_text(c: Change) -> str:
    if c.text and c.what in ("guard", "value", "constant", "ops"):
        text = c.text if c.what != "ops" else f"{c.text} x{c.before} -> x{c.after}"
    elif c.what == "dim":
        text = f"{c.input} dim {c.index}: {c.before} -> {c.after}"
    else:
        text = f"{c.input} {c.what}: {c.before} -> {c.after}"
    return text + (f" (made at {c.origin})" if c.origin is not None else "")


def _varying_text(v: VaryingInput) -> str:
    values = v.values
    shown = ("{" + ", ".join(str(x) for x in values) + "}" if len(values) <= 6 else
             f"{len(values)} values in {values[0]}..{values[-1]}")
    what = f"dim {v.dim}" if v.what == "dim" else v.what
    return f"{v.input} {what}: {shown}" + (" (grows)" if v.growing else "")


def _cards(report: Report) -> str:
    s = report.summary
    items: list[tuple[str, str | None]] = [
        ("steps", units.count(s.steps)),
        ("median step", units.seconds(s.median_step_seconds)
         if s.median_step_seconds is not None else None),
        ("wall", units.seconds(s.wall_seconds)),
        ("compilations", units.count(s.compiles) if s.compiles is not None else None),
        ("compiling", units.seconds(s.compile_seconds) if s.compile_seconds is not None
         else None),
        ("distinct graphs", units.count(s.distinct_graphs) if not s.eager_mode else None),
        ("executing", units.seconds(s.execute_seconds) if s.execute_seconds is not None
         else None),
        ("device-to-host transfers", units.count(s.transfers_from_device)
         if s.transfers_from_device is not None else None),
        ("host syncs", units.count(s.syncs)),
        ("graph breaks", units.count(s.graph_breaks) if s.graph_breaks else None),
        ("padding efficiency", f"{s.padding_efficiency:.2f}"
         if s.padding_efficiency is not None else None),
        ("real tokens/s", units.count(round(s.real_tokens_per_second))
         if s.real_tokens_per_second is not None else None),
    ]
    cards = [f'<div class="card"><b>{esc(v)}</b><span>{esc(label)}</span></div>'
             for label, v in items if v is not None]
    return f'<div class="cards">{"".join(cards)}</div>'


def _anatomy(report: Report) -> str:
    """Where the steady step's time goes: one stacked bar (each part's share, its time on
    hover) and a legend with every part's time."""
    times = report.anatomy
    if times is None:
        return ""
    steady = times.steady
    shares = steady.shares()
    parts = steady.parts()
    spans = []
    for part, colour in ANATOMY_COLOURS.items():
        share = shares[part]
        if share < 0.002:
            continue
        label = f"{times.label(part)} {share:.0%}"
        spans.append(f'<span style="width:{share * 100:.2f}%;background:{colour}" '
                     f'title="{esc(label)} ({esc(units.seconds(parts[part]))})">'
                     f"{esc(label) if share >= 0.06 else ''}</span>")
    legend = "".join(f'<span><i style="background:{colour}"></i>{esc(times.label(p))} '
                     f"{esc(units.seconds(parts[p]))} ({shares[p]:.0%})</span>"
                     for p, colour in ANATOMY_COLOURS.items() if p in times.measured)
    which = "steady steps" if times.basis == "steady" else "steps"
    return (f'<div class="anatomy"><b>Where the step\'s time goes</b> '
            f'<span class="sub">(mean of {times.steps} {which}: '
            f"{esc(units.seconds(steady.wall_s))} a step)</span>"
            f'<div class="bar">{"".join(spans)}</div><div class="legend">{legend}</div></div>')


def _step_row(row: Any) -> dict[str, Any]:
    """A per-step row with its anatomy's parts as columns of their own."""
    data = dict(to_jsonable(row))
    parts = data.pop("anatomy", None)
    if isinstance(parts, dict):
        for key in ("input_s", "host_s", "device_s", "sync_s", "other_s"):
            data[key] = parts.get(key)
    return data


def _finding(i: int, f: Finding) -> str:
    where = f" at <code>{esc(f.where)}</code>" if f.file else ""
    cost = finding_cost(f)
    stats = [cost] if cost and not cost.startswith("x") else [f"{f.count}x"] if cost else []
    if f.seconds:
        stats.append(units.seconds(f.seconds))
    context = []
    facts = f.facts
    compiled = f.compiled_at
    if compiled is not None and (compiled.file, compiled.line) != (f.file, f.line):
        context.append(f"compiled at <code>{esc(compiled)}</code>")
    if isinstance(facts, SyncFacts) and facts.happens_at is not None:
        context.append(f"happens inside the library at <code>{esc(facts.happens_at)}</code>")
    if isinstance(facts, RecompileFacts) and facts.value_set_at is not None:
        context.append(f"the value is set at <code>{esc(facts.value_set_at)}</code>")
    if len(f.stack) > 1:
        context.append("called from " + " &larr; ".join(
            f"<code>{esc(f'{fr.file}:{fr.line}')}</code>" for fr in f.stack[1:5]))
    if f.ranks and f.ranks != [0]:
        context.append(f"on ranks {esc(', '.join(map(str, f.ranks)))}")
    more = []
    if isinstance(facts, (RecompileFacts, ReuseFacts)) and facts.varying:
        more.append("<details><summary>what varies</summary><ul>" + "".join(
            f"<li>{esc(_varying_text(v))}</li>" for v in facts.varying) + "</ul></details>")
    if isinstance(facts, RecompileFacts) and facts.changes:
        rows = [{"change": _change_text(c)} for c in facts.changes]
        more.append(f"<details><summary>what changed ({len(rows)})</summary>"
                    f"{table(rows)}</details>")
    return (f'<div class="finding"><h3><span class="rank">{i}</span>{esc(f.kind)}{where}'
            f' &middot; {esc(", ".join(stats))}</h3>'
            + "".join(f'<div class="sub">{c}</div>' for c in context)
            + f"<div>{esc(f.detail)}</div>"
            + f'<div class="fix">fix: {esc(f.fix)}</div>' + "".join(more) + "</div>")


def _findings(findings: Iterable[Finding]) -> str:
    return "".join(_finding(i, f) for i, f in enumerate(findings, 1))


def _groups(report: Report, *kinds: str) -> list[dict[str, Any]]:
    return [{"kind": g.kind + (f" ({g.phase})" if g.phase == "backward" else ""),
             "site": g.site, "cause": g.cause, "count": g.count, "seconds": g.seconds,
             "steps": g.steps} for g in report.groups if g.kind in kinds]


ADVICE_COLUMNS = ["name", "changes", "graphs", "padding_efficiency", "compile_s", "execute_s",
                  "total_s", "tokens_per_sec"]
ADVICE_HEADERS = {"name": "policy", "padding_efficiency": "padding efficiency",
                  "compile_s": "compiling", "execute_s": "executing", "total_s": "total",
                  "tokens_per_sec": "predicted real tokens/s"}


def _advice(advice: Advice) -> str:
    """Padding advice: the recommendation in one line, then every policy the advisor ranked,
    predicted over the horizon."""
    best = advice.recommended
    head = (f"<p><b>{esc(best.name)}</b> (<code>{esc(best.policy.label())}</code>): predicted "
            f"{esc(units.rate(best.tokens_per_s, 'real tokens'))} over "
            f"{esc(units.count(advice.horizon))} steps, padding efficiency "
            f"{best.padding_efficiency:.2f}"
            + (f"; needs a model change: {esc(best.model_change)}" if best.model_change else "")
            + " (<code>lazyscope advise RUN</code> for more, <code>--emit</code> for the "
            "code)</p>")
    rows = [{"name": p.name, "changes": ", ".join(p.changes), "graphs": round(p.graphs),
             "padding_efficiency": round(p.padding_efficiency, 2), "compile_s": p.compile_s,
             "execute_s": p.execute_s, "total_s": p.total_s,
             "tokens_per_sec": round(p.tokens_per_s)} for p in advice.plans]
    return head + table(rows, columns=ADVICE_COLUMNS, headers=ADVICE_HEADERS)


def _memory(report: Report) -> str:
    """Each site's largest graph, in bytes and in MiB, the peak graph with its shape, the
    device over the run (or why not), and the out-of-memory error."""
    mem = report.memory
    if mem is None:
        return ""
    out = []
    if mem.peak is not None:
        shape = f"; its inputs {esc(mem.peak.shape)}" if mem.peak.shape else ""
        out.append(f'<p><b>peak graph</b>: {esc(units.nbytes(mem.peak.total))} '
                   f"({mem.peak.total:,} B), compiled at <code>{esc(mem.peak.site)}</code> at "
                   f"step {mem.peak.step}{shape}</p>")
    if mem.out_of_memory is not None:
        out.append(f'<p class="warn">{esc(mem.out_of_memory.line)}</p>')
    cols = ["inputs", "outputs", "aliased", "intermediates", "program", "total"]
    rows = [{"site": s.site, "graphs": s.graphs,
             **{c: getattr(s.largest, c) for c in cols},
             "held": units.nbytes(s.largest.total), "shape": s.largest.shape}
            for s in mem.sites]
    out.append(table(rows, ["site", "graphs", *cols, "held", "shape"],
                     {"site": "user site", "graphs": "graphs", "total": "total (B)",
                      "held": "total", "shape": "varying inputs (largest graph)"}))
    if mem.device is not None:
        d = mem.device
        out.append(table([{"source": d.source, "steps": d.steps, "in use (max)": d.used_max,
                           "at step": d.used_max_step, "peak": d.peak,
                           "reserved (max)": d.reserved_max, "limit": d.limit,
                           "headroom": d.headroom}]))
    elif mem.device_note:
        out.append(f'<p class="sub">device memory: {esc(mem.device_note)}</p>')
    graphs = [to_jsonable(g) for g in mem.graphs]
    out.append(f"<details><summary>every compiled graph ({mem.graphs_total})</summary>"
               f"{table(graphs, ['step', 'graph', 'site', *cols, 'shape'])}</details>")
    return "".join(out)


def render_html(report: Report, images: Mapping[str, bytes] | None = None, *,
                fragment: bool = False) -> str:
    """The report page (see the module docstring). ``images``: caption -> PNG bytes, in
    order; ``fragment``: to embed in a notebook."""
    images = images or {}
    s = report.summary
    title = " ".join([s.target, *s.args]).strip()
    head = (
        f"<h1>lazyscope report{': ' + esc(title) if title else ''}</h1>"
        f'<div class="sub">{esc(s.target_kind)} &middot; backend {esc(s.backend)} on '
        f"{esc(s.device or 'an unrecorded device')} &middot; status {esc(s.status)}"
        + (f" &middot; {esc(s.error)}" if s.error else "")
        + f" &middot; <code>{esc(report.run_dir)}</code></div>"
    )
    parts = [head]
    parts += [f'<p class="warn">warning: {esc(w)}</p>' for w in s.warnings]
    parts += [f'<p class="sub">note: {esc(n)}</p>' for n in report.run_notes]
    parts.append(f'<div class="verdict{" ok" if report.clean else ""}">{esc(report.verdict)}'
                 "</div>")
    parts.append(_cards(report))
    parts.append(_anatomy(report))
    if report.ranks:
        parts.append(section("Ranks", table([to_jsonable(r) for r in report.ranks])
                             + "".join(f'<p class="warn">{esc(d)}</p>'
                                       for d in report.divergence or []), "ranks"))
    parts.append(section("Findings, worst first", _findings(report.findings), "findings"))
    parts.append(section("Notes: worth knowing, not findings", _findings(report.notes),
                         "notes"))
    pictures = "".join(img(png, alt=name, caption=name) for name, png in images.items())
    parts.append(section("Steps", pictures, "plots"))
    parts.append(section("Device memory per compiled graph (bytes, the backend's own "
                         "analysis)", _memory(report), "memory"))
    rows = [to_jsonable(r) for r in report.compilations]
    more = report.compilations_total - len(rows)
    bill = report.compile_bill
    bill_html = ""
    if bill is not None:
        bill_html = ("".join(f'<p class="sub">{esc(t)}</p>' for t in bill_lines(bill))
                     + table([to_jsonable(b) for b in bill.lines],
                             ["site", "graphs", "seconds", "share", "ops", "inputs"],
                             {"site": "user line", "share": "of compile time",
                              "ops": "ops (largest graph)", "inputs": "its inputs"})
                     + '<p class="sub">every compilation, in order:</p>')
    parts.append(section(
        f"Compilations ({report.compilations_total})",
        bill_html +
        table(rows, ["step", "seconds", "graph", "phase", "cause", "owner", "site",
                     "executions", "memory_bytes", "ops", "inputs"],
              {"graph": "graph id", "site": "user site", "executions": "runs",
               "memory_bytes": "memory (B)"})
        + (f'<p class="sub">{more} more in the JSON report</p>' if more > 0 else ""),
        "compilations"))
    syncs = _groups(report, "sync")
    parts.append(section(f"Host syncs ({sum(g['count'] for g in syncs)})", table(syncs),
                         "syncs"))
    fb = s.fallback_ops
    fb_body = table([{"op": op, "executions": n} for op, n in fb.items()]) if fb else ""
    fb_body += table(_groups(report, "fallback"))
    parts.append(section("CPU fallbacks", fb_body, "fallbacks"))
    parts.append(section("Graph breaks and eager fallbacks",
                         table(_groups(report, "graph_break", "eager_fallback")), "breaks"))
    if report.advice:
        parts.append(section("Padding advice", _advice(report.advice), "advice"))
    if report.per_step:
        what = "buckets of steps" if report.per_step_bucketed else "steps"
        parts.append(section(
            "Per step",
            f"<details><summary>{len(report.per_step)} {what}</summary>"
            f"{table([_step_row(r) for r in report.per_step], max_rows=10_000)}</details>",
            "per-step"))
    return page(f"lazyscope: {title or 'report'}", "".join(p for p in parts if p),
                fragment=fragment)
