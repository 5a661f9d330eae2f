"""Every sentence lazyscope says about a run, one table per backend.

The analyzers decide *what* is true (which line, which input, how often, how long); this module
decides how to say it for the backend that produced the run, so an XLA sentence
(``xm.add_step_closure``, "device-to-host transfers", ``XLA_FLAGS``) never reaches a
torch.compile run and a new backend is one collector plus one table here.

``say(backend, key, **values)`` formats the backend's template for ``key``; a backend's table is
the neutral :data:`BASE` plus its own overrides. ``tests/unit/test_wording.py`` checks that every
key is defined for every backend and that no XLA word appears in the other tables.
"""

from __future__ import annotations

from typing import Any

#: backend-neutral sentences (overridden where a backend needs its own words)
BASE: dict[str, str] = {
    # verdicts
    "verdict_no_steps": "no step barrier was reached: nothing to time per step",
    "verdict_clean": "no recompilation in steady state: compiled code is reused "
                     "({compiles} compilation{s} in all)",
    "verdict_recompiling": "recompiles in steady state: {count} recompilation{s} at {sites} "
                           "site{ss} ({what})",
    "verdict_only_notes": "no recompilation in steady state ({compiles} compilation{s} in all; "
                          "{notes} one-off note{ns} below)",
    "verdict_no_compile": "no compilation: the program ran eagerly",
    "verdict_eager_mode": "eager mode: each op ran on its own ({compiles} compilations, "
                          "{executions} executions)",
    "extra_fallbacks": "{n} CPU fallback op executions ({ops})",
    "extra_syncs": "{n} host syncs",
    "extra_breaks": "{n} graph break{s}",
    "extra_eager": "{n} function{s} fell back to eager (recompile limit)",
    "extra_findings": "{n} finding{s}",
    # recompiles
    "recompile_detail": "{where} compiled {graphs} graph{s} ({counted} recompilation{cs} after "
                        "its first graph{fs}){reasons}",
    "recompile_note_detail": "{where} recompiled once at step {step}: {changes}",
    "fix_batch_dim": "the last batch is smaller than the others: drop it "
                     "(DataLoader(..., drop_last=True)) or pad it to the full batch size",
    "fix_growing": "{dims} grows at every compilation: a tensor is accumulated across steps "
                   "(e.g. torch.cat onto a running tensor); keep it at a fixed size (preallocate "
                   "and write by index, or keep a running sum)",
    "fix_dtype": "{inputs} changes dtype between graphs: cast it once, before the step, so "
                 "every step sees one dtype",
    "fix_count": "the compiled code's inputs change (a tensor enters it only in some steps): "
                 "pass the same tensors every step",
    "fix_unknown": "compare the compiled graphs to see what changes",
    # host syncs
    "sync_detail": "{reads} in {nsteps} step{s}: the host waited {seconds} for the device",
    "sync_fix_branch": "keep the decision on the device (torch.where, masking) or check the "
                       "value every N steps",
    "sync_fix_value": "keep the value on the device (accumulate it there) and read it every N "
                      "steps or after the loop",
    "sync_library_detail": "{reads} by {call} (library code, called at this line)",
    # graph breaks and eager fallbacks (torch.compile)
    "break_detail": "torch.compile stopped tracing here {count} time{s}: {reason}{hints}; the "
                    "code before and after runs as separate graphs with Python in between",
    "break_whole_detail": "torch.compile could not trace {function} at all: {reason}{hints}; "
                          "the whole function runs eagerly, uncompiled, at every call",
    "break_fix_item": "keep .item()/.tolist() out of the compiled function (return the tensor "
                      "and read it after the step), or set "
                      "torch._dynamo.config.capture_scalar_outputs = True",
    "break_fix_print": "remove print()/logging of tensors from the compiled function, or log "
                       "outside it",
    "break_fix_explicit": "a torch._dynamo.graph_break() is called here: remove it if it is not "
                          "needed",
    "break_fix_hints": "{hints}",
    "break_fix_generic": "rewrite this line so torch.compile can trace it, or move it out of "
                         "the compiled function",
    "eager_detail": "{function} hit torch._dynamo.config.recompile_limit ({limit}) at step "
                    "{step}: from that call on it runs eagerly, uncompiled; last reason: "
                    "{reason}",
    "eager_fix": "stop the recompilations that exhaust the limit: mark the varying dimension "
                 "dynamic (torch._dynamo.mark_dynamic(x, dim)) or compile with dynamic=True, or "
                 "pad to a few bucket sizes; raising the limit only postpones it",
    # fallbacks
    "fallback_detail": "{op} ran on the CPU {count} time(s) in {nsteps} step(s){via}: its "
                       "inputs go to the host and its result back every time",
    "fallback_fix": "replace {op} with ops the backend lowers: {replacement}",
    "fallback_fix_generic": "see the backend's lowered op list, or move the computation out of "
                            "the step",
    # multi-rank
    "rank_diverges_graphs": "rank {rank} compiled {graphs} graph(s) the other ranks did not: "
                            "ranks that trace different graphs wait for each other at every "
                            "collective (or hang)",
    "rank_diverges_time": "rank {rank}'s median step is {ratio:.2f}x the other ranks': a "
                          "straggler slows every collective",
}

XLA: dict[str, str] = {
    **BASE,
    "verdict_no_steps": "no step finished: nothing reached a step barrier (torch_xla.sync(), "
                        "xm.mark_step(), torch_xla.step())",
    "verdict_clean": "no recompilation in steady state: the graph is static ({compiles} "
                     "graph{s} compiled, each reused)",
    "verdict_only_notes": "no recompilation in steady state: the graph is static ({compiles} "
                          "graph{s} compiled; {notes} one-off note{ns} below)",
    "verdict_eager_mode": "eager mode: each op is compiled and executed on its own "
                          "({compiles} op compilations, {executions} executions)",
    "extra_syncs": "{n} device-to-host transfers",
    "fix_dims": "pad {dims} to a few fixed bucket sizes instead of each batch's own size "
                "(see `lazyscope advise RUN`)",
    "fix_dims_where": "{dims} takes a new size at {where}: pad it to a few fixed bucket sizes "
                      "there (see `lazyscope advise RUN`)",
    "fix_constant": "a Python number or size is baked into the graph at {where}, so each new "
                    "value is a new graph: pass it as a device tensor (torch.tensor(v, "
                    "device=dev)) or keep it fixed",
    "fix_special_scalar": "XLA bakes the special scalars 0 and 1 into the graph (a value that "
                          "becomes 0.0, such as a decayed learning rate, makes a new graph): "
                          "set XLA_NO_SPECIAL_SCALARS=1 or keep the value a device tensor",
    "fix_cast": "only casts (convert) differ between the graphs: a dtype conversion at {where} "
                "happens in some steps only; decide the precision once, before the loop",
    "fix_ops": "the traced operations differ between steps at {where}: move Python branches on "
               "step-dependent values out of the step, or use torch.where",
    "fix_evicted": "the same graphs were compiled again: XLA's compile cache dropped them "
                   "(XLA_COMPILATION_CACHE_SIZE, default 1024) or the process lost it; use fewer "
                   "shapes (buckets) or a larger cache",
    "fix_identical": "identical graphs were compiled under new hashes (torch_xla state such as "
                     "which input buffers are donated changed); if it keeps happening, keep "
                     "the step's outputs and inputs the same tensors every step",
    "fix_unknown": "no input shapes were recorded for these graphs (XLA wrote no HLO dump for "
                   "them: torch_xla was started before the trace, or XLA_FLAGS has its own "
                   "--xla_dump_to filters); trace the script with `lazyscope trace` to see which "
                   "input or dimension changes",
    "fix_no_shapes": "this run was traced with --no-graph-shapes: trace it again without that "
                     "flag to see which input or dimension changes between these graphs",
    "fix_count": "the step's inputs change (a tensor enters the graph only in some steps): "
                 "make the step consume the same tensors every step",
    "sync_detail": "{reads} in {nsteps} step{s} before the step barrier: the host waited "
                   "{seconds} for the device{forced}",
    "sync_forced": ", forcing {n} execution(s) that cut the step's graph",
    "sync_fix_value": "keep the value on the device (accumulate it there) and read it every N "
                      "steps or after the loop, or read it after the barrier in "
                      "xm.add_step_closure(fn, run_async=True)",
    "sync_closure_detail": "{reads} inside a step closure in {nsteps} step{s}: it runs after "
                           "the barrier and cuts no graph, but the host waits {seconds} for "
                           "each step's execution before tracing the next one",
    "sync_closure_fix": "pass run_async=True to xm.add_step_closure, or log every N steps",
    "fallback_fix_generic": "see torch_xla's lowered op list, or move the computation out of "
                            "the step",
    "fallback_fix": "replace {op} with ops torch_xla lowers: {replacement}",
}

COMPILE: dict[str, str] = {
    **BASE,
    "fix_dims": "{dims} changes between calls: mark it dynamic "
                "(torch._dynamo.mark_dynamic(x, dim)) or compile with dynamic=True, or pad to a "
                "few bucket sizes (see `lazyscope advise RUN`)",
    "fix_dims_where": "{dims} changes between calls at {where}: mark it dynamic "
                      "(torch._dynamo.mark_dynamic(x, dim)) or compile with dynamic=True, or pad "
                      "to a few bucket sizes",
    "fix_dynamic_now": "torch switched {dims} to dynamic after this recompilation: no further "
                       "recompiles for it; to skip the recompile, mark it dynamic up front "
                       "(torch._dynamo.mark_dynamic(x, dim))",
    "fix_break_value": "a graph break hands a Python number to the graph that resumes after it, "
                       "and that graph is compiled again for each new value: remove the graph "
                       "break (see the graph_break finding at the same line)",
    "fix_value": "torch.compile specialised on the value of {inputs}: pass it as a tensor, or "
                 "let dynamo treat it as dynamic (torch._dynamo.config.specialize_int = False "
                 "for ints; dynamic=True)",
    "fix_constant": "guarded values change between calls at {where}: pass them as tensors",
    "fix_special_scalar": "a value guard changes between calls: pass the value as a tensor",
    "fix_cast": "only dtype conversions differ between the compiled graphs: a cast at {where} "
                "happens in some calls only; decide the precision once, outside the compiled "
                "function",
    "fix_ops": "the traced code differs between calls at {where}: keep Python branches on "
               "changing values out of the compiled function",
    "fix_evicted": "the same function was compiled again for guards it had compiled before: "
                   "its compiled variants were dropped (torch._dynamo.reset() or a cache "
                   "limit)",
    "fix_identical": "the same function was compiled again with the same guards: look for "
                     "torch._dynamo.reset() or a new torch.compile() wrapper per step",
    "fix_no_shapes": "compare the guard failures of these compilations",
    "sync_detail": "{reads} in {nsteps} step{s}: the host waited {seconds} for the GPU",
    "sync_forced": "",
    "sync_fix_value": "keep the value on the GPU (accumulate it there) and read it every N "
                      "steps or after the loop; use non_blocking copies",
    "sync_closure_detail": "{reads} in {nsteps} step{s}: the host waited {seconds}",
    "sync_closure_fix": "read the value every N steps",
}

EAGER: dict[str, str] = {
    **COMPILE,
    "verdict_clean": "no recompilation in steady state ({compiles} compilation{s} of "
                     "torch.compile'd code in all)",
}

XLA.setdefault("fix_break_value", COMPILE["fix_break_value"])
XLA.setdefault("fix_value", COMPILE["fix_value"])
XLA.setdefault("fix_dynamic_now", COMPILE["fix_dynamic_now"])

TABLES: dict[str, dict[str, str]] = {"xla": XLA, "compile": COMPILE, "eager": EAGER}

#: words that belong to torch_xla and must never reach another backend's report
XLA_WORDS = ("XLA", "xla", "add_step_closure", "mark_step", "HLO", "device-to-host transfer",
             "lazyscope advise RUN` for XLA")


def table(backend: str) -> dict[str, str]:
    """The wording table of ``backend`` (the neutral one for an unknown backend)."""
    return TABLES.get(backend, BASE)


def say(backend: str, key: str, **values: Any) -> str:
    """The backend's sentence ``key`` with ``values`` filled in."""
    return table(backend)[key].format(**values)


def plural(n: int, word: str = "s") -> str:
    """``"s"`` unless ``n`` is 1."""
    return "" if n == 1 else word
