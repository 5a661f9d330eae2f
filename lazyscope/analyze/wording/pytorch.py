"""How reports of the plain-PyTorch backends say things: the sentences of ``compile``
(torch.compile) and ``eager`` runs, overriding the neutral ones of :mod:`lazyscope.analyze.wording`. No
XLA word may appear here (``tests/unit/test_wording.py``). Plain data: imports nothing."""

COMPILE: dict[str, str] = {
    "cache_none": "torch.compile's FX graph cache is off (TORCHINDUCTOR_FX_GRAPH_CACHE"
                           "=0): every new process compiles again",
    "cache_cold": "torch.compile's FX graph cache at {path}: {misses}, {hits}; "
                           "it was empty when the program started: the next run should "
                           "hit",
    "cache_stale": "torch.compile's FX graph cache at {path}: {misses}, {hits}, "
                            "{entries} there at the start (its key holds the graph, "
                            "the inductor settings and the torch version)",
    "cache_hits": "torch.compile's FX graph cache at {path}: {hits}, no miss",
    "verdict_host_bound": "host-bound: the host (Python, kernel launches) takes {share} of each "
                          "step and the GPU idles",
    "host_detail": "the host (Python, kernel launches) takes {per_step} of each {step} step "
                   "({share}) and the GPU was done by the step's end (the barrier waited "
                   "{device}): the GPU idles (host-bound)",
    "host_fix": "launch fewer, larger kernels: torch.compile(model) fuses the small ops; with "
                "torch.compile(model, mode=\"reduce-overhead\") CUDA graphs replay the step's "
                "launches at once; more work per step (a larger batch) for the same launches",
    "host_fix_trainer": "launch fewer, larger kernels: TrainingArguments(torch_compile=True); "
                        "a larger per_device_train_batch_size for the same launches",
    "host_fix_optimizer": "most of the host's time is the optimizer's step at {where}, "
                          "kernels launched per parameter tensor: construct it with "
                          "fused=True (one kernel for the whole update), or torch.compile the "
                          "step",
    "host_fix_compiled": "replay the step's launches with CUDA graphs: torch.compile(model, "
                         "mode=\"reduce-overhead\") (static shapes); more work per step (a "
                         "larger batch) for the same launches",
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
