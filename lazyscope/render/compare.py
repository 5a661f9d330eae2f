"""Rendering a comparison (:class:`~lazyscope.analyze.compare.Comparison`) and the advisor's
answer (:class:`~lazyscope.analyze.buckets.Advice`).

* ``render_compare_text(result) -> str``: the table, the ratios and the verdict line.
* ``write_compare_png(result, path) -> Path``: bars (real tokens/s including compilation, with
  compiles and padding efficiency annotated) next to the real tokens each run had processed
  against wall time (the slope is the throughput; a compilation is a flat stretch). With
  ``result.backends`` (``compare --backends``) rows are ``backend/policy``: one table and one
  picture across backends.
* ``compare_page(result, images, where=...) -> str``: the comparison's HTML page (the verdict:
  which policy wins and by how much; the table with units; the pictures), built with
  :mod:`lazyscope.render.html`'s helpers; ``write_compare_html(dir, result)`` writes it as
  ``DIR/report.html`` (atomically).
* ``render_advice_text(advice) -> str`` / ``render_advice_json``: the advisor's ranking;
  ``render_emit(advice, plan) -> str``: the lines to paste (:mod:`lazyscope.data`) with the
  computed numbers.

matplotlib is imported only inside the plotting function (Agg).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lazyscope.analyze.buckets import Advice, Plan
from lazyscope.analyze.compare import CompareRow, Comparison, Verdict
from lazyscope.analyze.makers import (
    SEQUENCE_LABELS,
    group_by_length,
    multiple_for,
    padded_shapes,
)
from lazyscope.core.units import counted
from lazyscope.core.units import seconds as fmt_seconds
from lazyscope.render.html import esc, img, page, table
from lazyscope.render.plots import LITERAL, figure
from lazyscope.store import atomic_write_text
from lazyscope.store.layout import COMPARE_JSON, COMPARE_PNG, REPORT_HTML


def _eff(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _compiles(n: int) -> str:
    return f"{n} compile" + ("" if n == 1 else "s")


def _label(r: CompareRow) -> str:
    return r.policy + (f" ({r.resolved})" if r.resolved else "")


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
        lead = (f"no policy wins: {_label(best)} and {noise} differ by measurement noise "
                f"(run-to-run spread {spread})")
    else:
        lead = (f"{_label(best)} is fastest end to end: {best.tokens_per_s:,.0f} real tokens/s "
                f"(compilation included; {_compiles(best.compiles)}, padding efficiency "
                f"{_eff(best.padding_efficiency)})" + (f"; {over}" if over else "")
                + (f"; {noise}: the same as it within noise" if noise else "")
                + ("" if verdict.spread is not None else f" (run-to-run spread {spread})"))
    return lead + (f"; failed: {', '.join(verdict.failed)}" if verdict.failed else "")


def render_compare_text(result: Comparison) -> str:
    rows = result.rows
    args = " ".join(result.args)
    backends = result.backends
    w = max([16, *(len(_label(r)) + 1 for r in rows)])
    what = "each backend x policy" if backends else "each policy"
    if result.repeat > 1:
        what += f" x {result.repeat} rounds"
    lines = [
        f"lazyscope compare: {result.scenario} {args} ({result.steps} steps, {what} "
        "in a fresh process)" + (f"; backends {', '.join(backends)}" if backends else ""),
        "",
        f"  {'backend/policy' if backends else 'policy':<{w}} {'compiles':>8} {'graphs':>6} "
        f"{'compile s':>10} {'execute s':>10} {'wall s':>8} {'real tok/s':>11} {'pad eff':>8}"
        "  status",
    ]
    for r in rows:
        status = r.status + (f": {r.error}" if r.error else "")
        lines.append(
            f"  {_label(r):<{w}} {r.compiles:>8} {r.distinct_graphs:>6} "
            f"{r.compile_s:>10.2f} {r.execute_s:>10.2f} {r.wall_s:>8.2f} "
            f"{r.tokens_per_s:>11,.0f} {_eff(r.padding_efficiency):>8}  {status}"
        )
    repeats = [r for r in rows if len(r.repeats) > 1]
    if repeats:
        lines += ["", f"  {result.repeat} rounds in alternating order; each row is its median run. "
                  "real tok/s of every round:"]
        lines += [f"    {_label(r):<{w}} " + ", ".join(f"{v:,.0f}" for v in r.repeats)
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


def write_compare_png(result: Comparison, path: Path) -> Path:
    """Bars of real tokens/s (including compilation) per policy, and the real tokens each policy
    had processed against wall time (comparisons of the previous release, without per-step
    tokens: wall time against step). Returns ``path``."""

    rows = result.rows
    with figure(path, ncols=2, figsize=(11, 4.2)) as (fig, (ax1, ax2)):
        import matplotlib.pyplot as plt

        names = [_label(r) for r in rows]
        tps = [r.tokens_per_s for r in rows]
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        bars = ax1.bar(range(len(rows)), tps,
                       color=[colors[i % len(colors)] for i in range(len(rows))])
        for bar, r in zip(bars, rows, strict=True):
            ax1.annotate(f"{_compiles(r.compiles)}\neff {_eff(r.padding_efficiency)}",
                         (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         ha="center", va="bottom", fontsize=7)
        ax1.set_xticks(range(len(rows)), names, rotation=20, fontsize=8, **LITERAL)
        ax1.set_ylabel("real tokens/s (including compilation)")
        ax1.margins(y=0.2)
        ax1.grid(axis="y", alpha=0.3)
        for i, r in enumerate(rows):
            xs: tuple[float, ...] = r.cumulative_wall_s
            ys: tuple[float, ...] = (tuple(float(t) for t in r.cumulative_tokens)
                                     if len(r.cumulative_tokens) == len(xs) else ())
            if not ys:  # a comparison of the previous release: wall time against step
                xs, ys = tuple(float(i) for i in range(len(xs))), xs
            ax2.plot(xs, ys, label=_label(r), color=colors[i % len(colors)],
                     marker=".", markersize=3, linewidth=1.2)
        tokens = all(len(r.cumulative_tokens) == len(r.cumulative_wall_s) for r in rows)
        ax2.set_xlabel("wall time (s, compilation included)" if tokens else "step")
        ax2.set_ylabel("real tokens processed" if tokens else "cumulative wall time (s)")
        ax2.grid(alpha=0.3)
        for text in ax2.legend(fontsize=8, loc="upper left").get_texts():  # policy names
            text.set_parse_math(False)
        per = "backend x policy" if result.backends else "policy"
        fig.suptitle(f"{result.scenario} {' '.join(result.args)}: "
                     f"{result.steps} steps per {per}", fontsize=9, **LITERAL)
    return Path(path)


# ------------------------------------------------------------------------------ the page

COMPARE_COLUMNS = ["policy", "ran", "status", "steps", "compiles", "graphs", "compile_s",
                   "execute_s", "wall_s", "real_tokens", "tokens_per_sec", "padding_efficiency",
                   "buckets"]
COMPARE_HEADERS = {"policy": "policy", "ran": "ran", "status": "status", "steps": "steps",
                   "compiles": "compiles", "graphs": "distinct graphs",
                   "compile_s": "compiling", "execute_s": "executing", "wall_s": "wall",
                   "real_tokens": "real tokens", "tokens_per_sec": "real tokens/s",
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


def write_compare_html(compare_dir: Path, result: Comparison | None = None) -> Path:
    """Write ``DIR/report.html`` for a ``lazyscope compare`` directory (``DIR/compare.json``
    read when ``result`` is not given), with ``compare.png`` inline; atomically. Returns its
    path; ValueError when ``compare.json`` is not a comparison."""
    compare_dir = Path(compare_dir)
    if result is None:
        data = json.loads((compare_dir / COMPARE_JSON).read_text(encoding="utf-8"))
        result = Comparison.from_json(data)
    images = {}
    png = compare_dir / COMPARE_PNG
    if png.is_file():
        images["real tokens/s per policy, and real tokens processed against wall time"] = \
            png.read_bytes()
    path = compare_dir / REPORT_HTML
    atomic_write_text(path, compare_page(result, images, where=str(compare_dir)))
    return path


# ------------------------------------------------------------------------------ advice


def _secs(v: float, calibrated: bool) -> str:
    if not calibrated:
        return f"{v / 1e6:.2f} Mu"
    if v >= 3600:
        return f"{v / 3600:.1f} h"
    if v >= 120:
        return f"{v / 60:.1f} min"
    return fmt_seconds(v)


def _changes(p: Plan) -> str:
    return ", ".join(p.changes) if p.changes else "-"


def _bounds(p: Plan) -> str:
    if p.policy.packed:
        return f"{p.policy.rows} rows x {p.policy.row_len}"
    if p.policy.kind == "longest":
        return "each batch's longest"
    b = p.boundaries
    return ",".join(str(x) for x in b) if len(b) <= 10 else f"{len(b)} lengths"


def _lengths_lines(advice: Advice) -> list[str]:
    L = advice.lengths
    s = L.summary()
    kind = "sequence lengths" if L.exact else "sequence lengths (estimated)"
    where = {"graph inputs": f"from {L.what} of the run's graphs",
             "annotations": f"from {L.what}", "file": "from the file",
             "planned": "planned"}.get(L.source, L.source)
    lines = [f"  lengths: {where}; {kind}: median {s['median']}, p90 {s['p90']}, "
             f"p99 {s['p99']}, max {s['max']} (mean {s['mean']}); batch {L.batch}, "
             f"max length {L.top}" + (", length-grouped batches" if L.grouped else "")]
    return lines


def render_advice_text(advice: Advice) -> str:
    """The advisor's ranking: every policy it priced, best first, with what each changes; the
    recommendation; the best one that leaves the model as it is; measured numbers from a
    ``compare`` beside the predicted ones."""
    cm = advice.cost_model
    cal = cm.calibrated
    lines = ["lazyscope advise: which padding policy processes this data fastest, end to end",
             *_lengths_lines(advice),
             f"  horizon: {advice.horizon:,} steps of {advice.lengths.batch} sequences "
             f"({advice.horizon_from}; --horizon STEPS for your run)",
             "  cost: a row of length L costs L + L^2/" + f"{cm.crossover:.0f} units; "
             + (f"calibrated on the run: {cm.unit_s * 1e6:.3f} us per unit, "
                f"{cm.compile_s:.2f} s per compile, {cm.graphs_per_shape:.1f} graphs per "
                "padded shape" + (f" and {cm.extra_graphs:.0f} compiled once (a first step)"
                                  if cm.extra_graphs else "") if cal else
                "uncalibrated: times in million units (Mu), a compile priced as "
                "20 full-length steps")]
    lines += [f"  note: {n}" for n in (*advice.lengths.notes, *advice.notes)]
    w = max(26, *(len(p.name) + 1 for p in advice.plans))
    speed = "real tok/s" if cal else "x max"
    lines += ["", f"  {'rank':>4}  {'policy':<{w}} {'graphs':>6} {'pad eff':>7} {'steps':>10} "
              f"{'compile':>9} {'execute':>9} {'total':>9} {speed:>11}  changes",
              ]
    run_policy = advice.run_policy
    base = advice.plan_named("pad to max")
    for i, p in enumerate(advice.plans, 1):
        tps = f"{p.tokens_per_s:,.0f}" if cal else _ratio(p, base)
        mark = "  (this run)" if run_policy and _same(p, run_policy) else (
            "  (what this run does)" if p.policy.kind == "longest" and _pads_to_longest(advice)
            else "")
        lines.append(f"  {i:>4}  {p.name:<{w}} {p.graphs:>6.0f} {p.padding_efficiency:>7.2f} "
                     f"{p.steps:>10,.0f} {_secs(p.compile_s, cal):>9} "
                     f"{_secs(p.execute_s, cal):>9} {_secs(p.total_s, cal):>9} {tps:>11}  "
                     f"{_changes(p)}{mark}")
    best = advice.recommended
    ref = advice.plan_named("pad to longest") if advice.lengths.source == "graph inputs" \
        else advice.plan_named("pad to max")
    lines += ["", f"recommended: {best.name} ({_bounds(best)}): "
              f"predicted {_ratio(best, ref)} the real tokens/s of {ref.name if ref else '-'}, "
              f"padding efficiency {best.padding_efficiency:.2f}, {counted(round(best.graphs), 'graph')}"]
    if best.model_change:
        lines.append(f"  needs a model change: {best.model_change}")
        alt = advice.best_without_model_change
        lines.append(f"without changing the model: {alt.name} ({_bounds(alt)}): "
                     f"{_ratio(alt, ref)} {ref.name if ref else '-'}; needs "
                     f"{_changes(alt)}")
    lines += _k_table(advice)
    if advice.measured:
        lines += ["", f"measured by `lazyscope compare` ({advice.compared}), each predicted for "
                  "its own steps:",
                  f"  {'policy':<24} {'plan':<26} {'steps':>5} {'predicted tok/s':>16} "
                  f"{'measured tok/s':>15} {'measured/predicted':>18}"]
        for m in advice.measured:
            ratio = (m.tokens_per_s / m.predicted_tokens_per_s
                     if m.predicted_tokens_per_s > 0 else 0.0)
            pred = f"{m.predicted_tokens_per_s:,.0f}" if cal else "(relative)"
            lines.append(f"  {m.policy:<24} {m.plan:<26} {m.steps:>5} {pred:>16} "
                         f"{m.tokens_per_s:>15,.0f} {ratio:>17.2f}x")
    lines += ["", "the code: lazyscope advise RUN --emit (--no-model-changes for the best "
              "policy that keeps the model as it is)"]
    return "\n".join(lines) + "\n"


def _pads_to_longest(advice: Advice) -> bool:
    """A run read from its graphs whose padded length took a new value at most compiled
    steps: it pads each batch to its longest."""
    L = advice.lengths
    return (L.source == "graph inputs" and not advice.run_policy
            and len(set(L.maxima)) >= max(3, 0.5 * L.steps_known))


def _same(p: Plan, run_policy: str) -> bool:
    q = p.policy
    if run_policy == "max":
        return q.kind == "max"
    if run_policy == "longest":
        return q.kind == "longest"
    if run_policy == "packed":
        return q.packed and q.rows is not None
    return run_policy == q.label()


def _ratio(p: Plan, ref: Plan | None) -> str:
    if ref is None or ref.tokens_per_s <= 0:
        return "-"
    return f"{p.tokens_per_s / ref.tokens_per_s:.2f}x"


def _k_table(advice: Advice) -> list[str]:
    if len(advice.per_k) < 2:
        return []
    cal = advice.cost_model.calibrated
    out = ["", "  exact optimal buckets per K (random batches), total over the horizon:"]
    for p in advice.per_k:
        out.append(f"    K={p.buckets:<2} {_secs(p.total_s, cal):>9}  pad eff "
                   f"{p.padding_efficiency:.2f}  {_bounds(p)}")
    return out


def render_advice_json(advice: Advice) -> str:
    return json.dumps(advice.to_json(), indent=2) + "\n"


def render_emit(advice: Advice, plan: Plan | None = None) -> str:
    """The lines to paste for ``plan`` (default: the recommendation): a DataLoader with
    :mod:`lazyscope.data`'s collator (and sampler), the numbers computed here, and what the
    model must accept when it packs."""
    p = plan or advice.recommended
    kept = []
    if plan is None and p.policy.kind == "longest":
        # what the run does already is predicted fastest: nothing to change; the runner-up's
        # code, said as such (never a collate that pads to the longest again)
        other = next((q for q in advice.plans if q.policy.kind != "longest"), None)
        if other is not None:
            kept = [f"# lazyscope advise: {p.name}, what this run does, is predicted fastest over "
                    f"{advice.horizon:,} steps: nothing to change; the next best, if the run "
                    "will be longer (--horizon STEPS):"]
            p = other
    pol = p.policy
    b = advice.lengths.batch
    ref = advice.plan_named("pad to longest") if advice.lengths.source == "graph inputs" \
        else advice.plan_named("pad to max")
    head = [f"# lazyscope advise: {p.name} -- predicted {_ratio(p, ref)} the real tokens/s of "
            f"{ref.name if ref else '-'} over {advice.horizon:,} steps "
            f"(padding efficiency {p.padding_efficiency:.2f}, "
            f"{counted(round(p.graphs), 'compiled graph')})"]
    lengths_line = ("lengths = lengths_of(dataset)  # each item's tokens: item['input_ids'], "
                    "item[0] of a (tokens, label) pair, or the item")
    if pol.packed:
        rows, row_len = pol.rows, pol.row_len
        extra = f", max_position={advice.lengths.top}" if (row_len or 0) > advice.lengths.top \
            else ""
        code = [
            "from torch.utils.data import DataLoader",
            "from lazyscope.data import PackedBatchSampler, PackRows, document_causal_mask, "
            "lengths_of",
            "",
            lengths_line,
            f"row_len = max({row_len}, max(lengths))  # a document longer than the run showed "
            "widens the rows",
            f"sampler = PackedBatchSampler(lengths, rows={rows}, row_len=row_len, "
            "shuffle=True, seed=0)",
            f"loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=PackRows({rows}, "
            f"row_len, return_document_ids=True{extra}))",
            f"# each batch: input_ids, labels, position_ids, document_ids, all ({rows}, "
            f"{row_len}); labels are -100 on padding and on each document's first token",
            "# the model must keep the documents of a row apart:",
            "#   mask = document_causal_mask(batch['document_ids'].to(device))  "
            f"# ({rows}, 1, {row_len}, {row_len}) bool: SDPA attn_mask",
            "#   positions = batch['position_ids']  # restart at 0 in each document",
            "# Hugging Face models: pass input_ids, labels and position_ids (no attention_mask):",
            "#   transformers finds the documents in position_ids (DataCollatorWithFlattening's "
            "form, in fixed rows)",
            "# set_epoch(epoch) on the sampler reshuffles each epoch",
        ]
    else:
        bounds = list(pol.boundaries) if pol.kind != "longest" else None
        collate = f"PadToBuckets({bounds}, rows={b})"
        if pol.grouped:
            code = [
                "from torch.utils.data import DataLoader",
                "from lazyscope.data import LengthGroupedBatchSampler, PadToBuckets, lengths_of",
                "",
                lengths_line,
                f"sampler = LengthGroupedBatchSampler(lengths, batch_size={b}, shuffle=True, "
                "seed=0)",
                f"loader = DataLoader(dataset, batch_sampler=sampler, collate_fn={collate})",
            ]
        else:
            code = [
                "from torch.utils.data import DataLoader",
                "from lazyscope.data import PadToBuckets",
                "",
                f"collate = {collate}",
                f"loader = DataLoader(dataset, batch_size={b}, shuffle=True, collate_fn=collate)",
            ]
        one_label = advice.task == SEQUENCE_LABELS
        code += [f"# each batch: input_ids, attention_mask, labels, all ({b}, L) with L in "
                 f"{bounds if bounds else 'the batch lengths'}"
                 + (f" (labels ({b},): one a sequence)" if one_label else "")
                 + "; pad id 0, labels -100 on padding; (tokens, label) items give "
                 "(input_ids, labels)",
                 *([f"# a batch longer than {bounds[-1]} (longer than the run showed) is "
                    "padded to a multiple of 8, a shape of its own, with a warning "
                    "(truncate=True cuts it)"] if bounds else []),
                 "# Hugging Face Trainer: data_collator=" + collate
                 + (f" and {_grouping(advice)} for the length grouping" if pol.grouped
                    else "")]
        if advice.collator is not None:
            code = _hf_collator_first(advice, pol.grouped) + code
    return "\n".join(kept + head + code) + "\n"


def _grouping(advice: Advice) -> str:
    """How the installed transformers asks for a length-grouped sampler (both spellings when
    the run does not say which transformers it had)."""
    version = str((advice.collator or {}).get("version") or "")
    if version:
        return group_by_length(version)
    return ('TrainingArguments(train_sampling_strategy="group_by_length") (transformers 5; '
            "group_by_length=True in 4.x)")


def _hf_collator_first(advice: Advice, grouped: bool) -> list[str]:
    """For a Hugging Face padding collator, the smallest change first: the same collator,
    padding to a multiple (or to one length); the advisor's buckets come after."""
    name = str((advice.collator or {}).get("name", "DataCollatorWithPadding")).split(".")[-1]
    sizes = sorted(set(advice.lengths.maxima)) or [advice.lengths.top]
    multiple = multiple_for(sizes)
    shapes = padded_shapes(sizes, multiple)
    top = shapes[-1] if shapes else advice.lengths.top
    return [
        f"# Hugging Face Trainer with {name}: the smallest change, where it is built",
        f"#   (pads each batch to a multiple of {multiple}: {len(shapes)} shapes for the "
        f"lengths seen, {min(sizes)}..{max(sizes)})",
        f"data_collator = {name}(tokenizer, pad_to_multiple_of={multiple})",
        f"# or one shape: {name}(tokenizer, padding=\"max_length\", max_length={top})",
        f"# and to keep the padding small: {_grouping(advice)}",
        "# the advisor's own plan, for any loader:",
    ]
