"""How XLA reports say things: the XLA backend's sentences (overriding the neutral ones of
:mod:`lazyscope.analyze.wording`, which holds every key). Plain data: imports nothing, so the analysis
reads it where torch_xla is not installed."""

WORDS: dict[str, str] = {
    "cache_none": "no persistent compilation cache: every new process compiles every "
                      "graph again; torch_xla.runtime.initialize_cache(\"/path/to/cache\") "
                      "before the first computation keeps compiled graphs across runs",
    "cache_stale": "persistent cache at {path}: {misses}, {hits}, with {entries} "
                       "there at the start that did not match: the key holds the graph, "
                       "the XLA flags and the torch_xla version, so a changed graph, XLA_FLAGS "
                       "or torch_xla makes new entries",
    "cache_failed_loads": "persistent cache at {path}: {failed} failed to "
                              "load ({hits}, {misses}): on XLA:CPU torch_xla cannot "
                              "read back what it wrote; on a TPU, a cache written by another "
                              "torch_xla or libtpu",
    "verdict_host_bound": "host-bound: tracing (Python building the graph) takes {share} of "
                          "each step and the device idles",
    "extra_host_bound": "host-bound ({share} of each step tracing)",
    "input_fix_device_loader": "; and iterate it through torch_xla's MpDeviceLoader "
                               "(pl.MpDeviceLoader(loader, device)), which uploads the next "
                               "batches while the step runs",
    "host_detail": "Python builds the graph (tracing) for {per_step} of each {step} step "
                   "({share}), while the device runs it in {device}: the device idles about "
                   "{idle} a step (host-bound)",
    "host_fix_trainer": "trace less: TrainingArguments(torch_compile=True, "
                        "torch_compile_backend=\"openxla\") compiles the model with dynamo "
                        "(its graph traced once, later steps skip LazyTensor tracing); a larger "
                        "per_device_train_batch_size gives each step more device work for the "
                        "same tracing",
    "host_fix_optimizer": "most of the tracing is the optimizer's step at {where} (one update "
                          "traced per parameter tensor, every step): trace it once, "
                          "opt_step = torch.compile(opt.step, backend=\"openxla\") and call "
                          "opt_step() there (dynamo captures the update on the first steps, "
                          "later steps replay the graph); the model too: torch.compile(model, "
                          "backend=\"openxla\")",
    "host_fix": "trace less: compile the step with torch.compile(model, backend=\"openxla\") "
                "(dynamo captures the graph on the first steps, later steps skip LazyTensor "
                "tracing); run N repeated layers with torch_xla.experimental.scan_layers "
                "(one layer traced, not N); give each step more work (a larger batch) for the "
                "same tracing",
    "constant_set_detail": "the Python number set at {set_at} is baked into the graph as a "
                           "constant (XLA passes most Python scalars as data, but not this "
                           "one; it is not one of the special scalars 0 and 1)",
    "library_compiles": "{n} compiled by the backend for its own bookkeeping (not the "
                        "program's; not findings)",
    "no_barrier_fix": "end every iteration of the loop at {loop} with a step barrier: "
                      "torch_xla.sync() as its last line (or iterate the data through torch_xla's "
                      "MpDeviceLoader, pl.MpDeviceLoader(loader, device), which marks a step per "
                      "batch), so each iteration compiles one graph once and reuses it",
    "verdict_no_steps": "no step finished: nothing reached a step barrier (torch_xla.sync(), "
                        "xm.mark_step(), torch_xla.step())",
    "verdict_clean": "no recompilation in steady state: {compiles} graph{s} compiled and "
                     "reused",
    "verdict_only_notes": "no recompilation in steady state: {compiles} graph{s} compiled; "
                          "{notes} note{ns} below",
    "verdict_eager_mode": "eager mode: each op is compiled and executed on its own "
                          "({compiles} op compilations, {executions} executions)",
    "extra_syncs": "{n} device-to-host transfers",
    "fix_dims": "pad {dims} to a few fixed bucket sizes instead of each batch's own size "
                "(see `lazyscope advise RUN`)",
    "fix_dims_where": "{dims} takes a new size at {where}: pad it to a few fixed bucket sizes "
                      "there (see `lazyscope advise RUN`)",
    "fix_constant": "a Python number is baked into the graph as a constant at {where}, so "
                    "each new value is a new graph: pass it as a device tensor (torch.tensor(v, "
                    "device=dev)) where the op takes a tensor, or keep it fixed",
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
    "sync_forced": ", forcing {n} that cut the step's graph",
    "sync_fix_value": "keep the value on the device (accumulate it there) and read it every N "
                      "steps or after the loop, or read it after the barrier in "
                      "xm.add_step_closure(fn, run_async=True)",
    "sync_after_detail": "{reads} in {nsteps} step{s}, after the step's barrier (it cut no "
                         "graph): the host waited {seconds} for the device to finish the "
                         "step{forced}",
    "sync_fix_every": "it already reads every {every} steps, and still costs the run: read it in xm.add_step_closure(fn, run_async=True), which "
                      "does not make the host wait, or less often",
    "sync_closure_detail": "{reads} inside a step closure in {nsteps} step{s}: it runs after "
                           "the barrier and cuts no graph, but the host waits {seconds} for "
                           "each step's execution before tracing the next one",
    "sync_closure_fix": "pass run_async=True to xm.add_step_closure, or log every N steps",
    "fallback_fix_generic": "see torch_xla's lowered op list, or move the computation out of "
                            "the step",
    "fallback_fix": "replace {op} with ops torch_xla lowers: {replacement}",
    "generate_fix": "give generate() one cache size and one input shape, as transformers "
                    "documents for XLA: a static cache, model.generate(..., "
                    "cache_implementation=\"static\") (a StaticCache sized once; "
                    "generation_config.max_cache_len for calls of several lengths), prompts "
                    "padded to one length (tokenizer(..., padding=\"max_length\", "
                    "max_length=N), or pad_to_multiple_of) and a fixed max_new_tokens: the "
                    "first call compiles its graphs, the next calls reuse them",
}
