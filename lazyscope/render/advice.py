"""Rendering the advisor's answer (:class:`~lazyscope.analyze.buckets.Advice`).

* ``render_advice_text(advice) -> str`` / ``render_advice_json``: the advisor's ranking;
* ``render_emit(advice, plan) -> str``: the lines to paste (:mod:`lazyscope.data`) with the
  computed numbers.
"""

from __future__ import annotations

from lazyscope.analyze.buckets import Advice, Plan, largest_shape, plan_for_run
from lazyscope.analyze.makers import (
    SEQUENCE_LABELS,
    group_by_length,
    more_than_padding,
    multiple_for,
    padded_shapes,
)
from lazyscope.core.padding import Policy
from lazyscope.core.units import counted, nbytes, size_given
from lazyscope.core.units import seconds as fmt_seconds
from lazyscope.render.json import dumps


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
    lines += _memory_lines(advice)
    lines += [f"  note: {n}" for n in (*advice.lengths.notes, *advice.notes)]
    w = max(26, *(len(p.name) + 1 for p in advice.plans))
    speed = "real tok/s" if cal else "x max"
    lines += ["", f"  {'rank':>4}  {'policy':<{w}} {'graphs':>6} {'pad eff':>7} {'steps':>10} "
              f"{'compile':>9} {'execute':>9} {'total':>9} {speed:>11} {'graph mem':>10}  "
              "changes",
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
                     f"{_secs(p.execute_s, cal):>9} {_secs(p.total_s, cal):>9} {tps:>11} "
                     f"{_mem(p):>10}  {_changes(p)}{mark}")
    lines += _ruled_out_lines(advice)
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
                     f"{_changes(alt)}" if alt is not None else
                     "without changing the model: no policy fits the device memory given")
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
            mem = "" if m.graph_memory is None and m.predicted_graph_memory is None else (
                f"  graph mem {_nb(m.graph_memory)} (predicted {_nb(m.predicted_graph_memory)})")
            lines.append(f"  {m.policy:<24} {m.plan:<26} {m.steps:>5} {pred:>16} "
                         f"{m.tokens_per_s:>15,.0f} {ratio:>17.2f}x{mem}")
    lines += ["", "the code: lazyscope advise RUN --emit (--no-model-changes for the best "
              "policy that keeps the model as it is)"]
    return "\n".join(lines) + "\n"


def _nb(n: int | None) -> str:
    return "-" if n is None else nbytes(n)


def _mem(p: Plan) -> str:
    """A plan's largest graph, predicted; "-" where not measured."""
    return _nb(p.graph_bytes)


def _largest(p: Plan, advice: Advice) -> str:
    """``rows x length`` of a plan's largest padded batch."""
    L = advice.lengths
    rows, length = largest_shape(p.policy, L.batch, L.top if p.policy.kind != "longest"
                                 else max(L.sequences, default=L.top))
    return f"{rows}x{length}"


def _memory_lines(advice: Advice) -> list[str]:
    """How each plan's largest graph is predicted (or that it is not), and the device memory
    the plans were held to."""
    if advice.memory is None:
        return [f"  graph memory: {advice.memory_note or 'not measured'}"]
    out = [f"  graph memory: each plan's largest padded batch (rows x length); {advice.memory.how}"]
    if advice.device_memory is not None:
        out.append(f"  device memory: {size_given(advice.device_memory)} "
                   f"({advice.device_memory:,} bytes, --device-memory): "
                   + (f"{counted(len(advice.ruled_out), 'policy', 'policies')} ruled out"
                      if advice.ruled_out else "every policy fits"))
    return out


def _ruled_out_lines(advice: Advice) -> list[str]:
    if not advice.ruled_out or advice.device_memory is None:
        return []
    out = ["", f"  ruled out: their largest graph would not fit in {size_given(advice.device_memory)}"
           " of device memory (never recommended):"]
    for p in advice.ruled_out:
        out.append(f"        {p.name:<26} largest batch {_largest(p, advice)}: graph "
                   f"{_mem(p)} > {size_given(advice.device_memory)}")
    return out


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
                   f"{p.padding_efficiency:.2f}  {_bounds(p)}"
                   + (f"  (ruled out: graph {_mem(p)} does not fit)" if p.fits is False else ""))
    return out


def render_advice_json(advice: Advice) -> str:
    return dumps(advice) + "\n"


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
            f"{counted(round(p.graphs), 'compiled graph')}"
            + (f", largest graph {nbytes(p.graph_bytes)}" if p.graph_bytes is not None else "")
            + (f", fits {size_given(advice.device_memory)}"
               if p.fits and advice.device_memory is not None else "") + ")"]
    lengths_line = ("lengths = lengths_of(dataset)  # each item's tokens: item['input_ids'], "
                    "item[0] of a (tokens, label) pair, or the item")
    if pol.packed:
        rows, row_len = pol.rows, pol.row_len
        extra = f", max_position={advice.lengths.top}" if (row_len or 0) > advice.lengths.top \
            else ""
        code = [
            "from torch.utils.data import DataLoader",
            "from lazyscope.data import PackedBatchSampler, PackRows, lengths_of",
            "from lazyscope.data import document_causal_mask, flex_block_mask, "
            "multihead_attention_mask  # the mask for your attention, below",
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
            "# the model must keep the documents of a row apart, with the mask its attention "
            "takes (ids = batch['document_ids'].to(device)):",
            "#   F.scaled_dot_product_attention(q, k, v, attn_mask=document_causal_mask(ids))  "
            f"# ({rows}, 1, {row_len}, {row_len}) bool, True = attend",
            "#   nn.MultiheadAttention: attn_mask=multihead_attention_mask(ids, num_heads)  "
            f"# ({rows} * num_heads, {row_len}, {row_len}) bool, True = masked: the opposite "
            "convention",
            "#   flex_attention(q, k, v, block_mask=flex_block_mask(ids))",
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
        notes = [f"# each batch: input_ids, attention_mask, labels, all ({b}, L) with L in "
                 f"{bounds if bounds else 'the batch lengths'}"
                 + (f" (labels ({b},): one a sequence)" if one_label else "")
                 + "; pad id 0, labels -100 on padding; (tokens, label) items give "
                 "(input_ids, labels)",
                 *([f"# a batch longer than {bounds[-1]} (longer than the run showed) is "
                    "padded to a multiple of 8, a shape of its own, with a warning "
                    "(truncate=True cuts it)"] if bounds else [])]
        grouping = f" and {_grouping(advice)} for the length grouping" if pol.grouped else ""
        if advice.collator is None:
            code += [*notes, f"# Hugging Face Trainer: data_collator={collate}{grouping}"]
        else:
            # the program's own collator, wrapped: what it does is kept, its padding changed;
            # then, for a Hugging Face collator, its own smallest change
            code = [*_wrapped(advice, bounds, lengths_line, grouping),
                    *_hf_collator_option(advice, p, ref)]
    return "\n".join(kept + head + code) + "\n"


def _wrapped(advice: Advice, bounds: list[int] | None, lengths_line: str,
             grouping: str) -> list[str]:
    """The plan as code that keeps the program's collator (``lazyscope.data.Bucketed`` around
    it): the name the program gives it, where it builds it, what it does that is kept."""
    c = advice.collator or {}
    name = str(c.get("name") or "the collate function").split(".")[-1]
    trainer = bool(c.get("trainer"))
    var = str(c.get("variable") or ("data_collator" if trainer else "collate"))
    built = c.get("built_at")
    where = f" at {built[0]}:{built[1]}" if isinstance(built, list) and built else ""
    kept = more_than_padding(c) or "its batches"
    if bounds is None:
        return [f"# {var} ({name}{where}) pads each batch to its longest already: nothing to "
                "change"]
    b = advice.lengths.batch
    grouped = bool(grouping)
    imports = "Bucketed, LengthGroupedBatchSampler, lengths_of" if grouped and not trainer \
        else "Bucketed"
    code = [*(["from torch.utils.data import DataLoader"] if not trainer else []),
            f"from lazyscope.data import {imports}", "",
            f"# {var}: the {name} your program builds{where}, wrapped: it keeps {kept}, the "
            "batch's keys and type; only the padded length changes",
            f"{var} = Bucketed({var}, {bounds})",
            f"# each batch's sequences padded to a length in {bounds}; a batch longer than "
            f"{bounds[-1]} (longer than the run showed) to a multiple of 8, a shape of its own, "
            "with a warning"]
    loader = c.get("loader_at")
    made = f" (the one made at {loader[0]}:{loader[1]})" if isinstance(loader, list) and \
        loader else ""
    if trainer:
        return code + [f"# Trainer(..., data_collator={var}){grouping}"]
    if grouped:
        return code + [f"# your DataLoader{made}, its batches grouped by length:", lengths_line,
                       f"sampler = LengthGroupedBatchSampler(lengths, batch_size={b}, "
                       "shuffle=True, seed=0)",
                       f"loader = DataLoader(dataset, batch_sampler=sampler, collate_fn={var})"]
    return code + [f"# your DataLoader{made} with collate_fn={var}:",
                   f"loader = DataLoader(dataset, batch_size={b}, shuffle=True, "
                   f"collate_fn={var})"]


def _grouping(advice: Advice) -> str:
    """How the installed transformers asks for a length-grouped sampler (both spellings when
    the run does not say which transformers it had)."""
    version = str((advice.collator or {}).get("version") or "")
    if version:
        return group_by_length(version)
    return ('TrainingArguments(train_sampling_strategy="group_by_length") (transformers 5; '
            "group_by_length=True in 4.x)")


def _hf_collator_option(advice: Advice, plan: Plan, ref: Plan | None) -> list[str]:
    """For a Hugging Face collator whose installed class takes ``pad_to_multiple_of`` (the
    signature the run recorded), the smallest change, after the advisor's plan (the one ranked
    first) and priced as it is: the same collator padding each batch to a multiple of 8 or more
    (buckets at every multiple up to the max length), its prediction beside the plan's; said
    as the argument to add to the user's own call, which keeps everything else it does."""
    c = advice.collator or {}
    takes = c.get("accepts")
    if c.get("package") != "transformers" or not isinstance(takes, list) or \
            "pad_to_multiple_of" not in takes:
        return []
    name = str(c.get("name", "")).split(".")[-1]
    built = c.get("built_at")
    where = f" at {built[0]}:{built[1]}" if isinstance(built, list) and built else ""
    sizes = sorted(set(advice.lengths.maxima)) or [advice.lengths.top]
    multiple = multiple_for(sizes)
    shapes = padded_shapes(sizes, multiple)
    top = shapes[-1] if shapes else advice.lengths.top
    mem, limit = advice.memory, advice.device_memory
    if mem is not None and limit is not None and \
            mem.bytes_at(top, advice.lengths.batch) > limit:
        # the collator's largest shape would not fit: never pasted
        return [f"# (the Hugging Face collator padded to a multiple of {multiple} makes "
                f"{advice.lengths.batch}x{top} batches: a graph of "
                f"{nbytes(mem.bytes_at(top, advice.lengths.batch))}, over the "
                f"{size_given(limit)} given: not an option here)"]
    option = multiple_plan(advice, multiple)
    than = f" the real tokens/s of {ref.name}" if ref is not None else ""
    return [
        "",
        f"# or, the smallest change to the {name} the program has: predicted "
        f"{_ratio(option, ref)}{than}, against the plan's {_ratio(plan, ref)} above:",
        f"#   each batch padded to a multiple of {multiple}: {len(shapes)} shapes for the "
        f"lengths seen, {min(sizes)}..{max(sizes)}",
        f"#   add pad_to_multiple_of={multiple} to the {name}(...){where} (an argument the "
        f"installed {name} takes)",
        f"# and to keep the padding small: {_grouping(advice) if c.get('trainer') else ''}"
        + ("" if c.get("trainer") else "lazyscope.data.LengthGroupedBatchSampler"),
    ]


def multiple_plan(advice: Advice, multiple: int) -> Plan:
    """The advisor's prediction for padding each batch to a multiple of ``multiple`` (a Hugging
    Face collator's ``pad_to_multiple_of``) over the advice's horizon."""
    top = advice.lengths.top
    bounds = tuple(range(multiple, top, multiple)) + (-(-top // multiple) * multiple,)
    policy = Policy("buckets", bounds, grouped=advice.lengths.grouped)
    return plan_for_run(advice, policy, advice.horizon)
