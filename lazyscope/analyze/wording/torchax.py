"""How reports of torchax runs (PyTorch on JAX arrays, compiled by ``jax.jit``) say things,
overriding the neutral sentences of :mod:`lazyscope.analyze.wording` where the cause or the fix
is JAX's. No XLA-backend word may appear here (``tests/unit/test_wording.py``). Plain data:
imports nothing."""

WORDS: dict[str, str] = {
    "verdict_no_steps": "no step finished: no jitted function was called twice and no "
                        "lazyscope.barrier() was reached",
    "verdict_clean": "no recompilation in steady state: {compiles} compilation{s} by JAX, each "
                     "compiled program reused",
    "verdict_only_notes": "no recompilation in steady state ({compiles} compilation{s} by JAX; "
                          "{notes} note{ns} below)",
    "library_compiles": "{n} compiled by JAX or a library for its own use (a PRNG seed, an "
                        "optimizer's init: not the program's; not findings)",
    "extra_syncs": "{n} host reads",
    "fix_dims": "{dims} takes a new size at each call, and jax.jit compiles the function "
                "again for each new shape: pad it to a few fixed bucket sizes (see `lazyscope "
                "advise RUN`)",
    "fix_dims_where": "{dims} takes a new size at {where}, and jax.jit compiles the function "
                      "again for each new shape: pad it to a few fixed bucket sizes there (see "
                      "`lazyscope advise RUN`)",
    "fix_dtype": "{inputs} changes dtype or weak type between calls (a Python number is a "
                 "weakly typed scalar to JAX, a jnp or torch scalar a strongly typed one), and "
                 "each is compiled apart: convert it once, before the loop, and pass the same "
                 "kind every call",
    "fix_value": "{inputs} is a static argument (static_argnums / static_argnames): each new "
                 "value compiles the function again; pass it as an array (traced, not static), "
                 "or keep it to a few values",
    "fix_count": "the structure of the arguments changes between calls (a key added or "
                 "dropped, None in place of a tensor, a list of another length): JAX compiles "
                 "each structure apart; pass the same structure every call",
    "fix_evicted": "the same function was compiled again for arguments it had compiled: JAX "
                   "keys its cache on the function object, and a new one is made each time "
                   "(interop.jax_jit / jax.jit / torchax.compile called inside the loop, or a "
                   "lambda or functools.partial made per step): jit the function once, before "
                   "the loop, and call that",
    "fix_identical": "the same function was compiled again for arguments it had compiled: "
                     "jit it once, before the loop, and call that object every step",
    "fix_ops": "the traced operations differ between calls at {where}: keep Python branches "
               "on changing values out of the jitted function (jnp.where / torch.where)",
    "fix_constant": "a Python value read inside the jitted function at {where} is baked into "
                    "the compiled program: pass it as an argument (an array) instead",
    "fix_special_scalar": "a Python value read inside the jitted function is baked into the "
                          "compiled program: pass it as an argument (an array)",
    "fix_unknown": "JAX did not say what changed (no cache-miss explanation was recorded for "
                   "these compilations): compare the inputs listed with each compilation",
    "fix_no_shapes": "JAX did not say what changed: compare the inputs listed with each "
                     "compilation",
    "fix_eager_ops": "the program runs torch ops eagerly on torchax tensors, and JAX compiles "
                     "every op again for each new shape: jit the step (interop.jax_jit(step), "
                     "torchax.compile(model), or torchax.train.make_train_step + jax_jit) so "
                     "one program is compiled per shape, and pad the shapes to a few buckets",
    "recompile_ops_detail": "{where}: ops run eagerly were compiled {compiles} times, "
                            "{counted} of them again for a new shape ({ops}){also}",
    "sync_detail": "{reads} in {nsteps} step{s}: the host waited {seconds} for the value "
                   "(JAX dispatches asynchronously: a read waits for the work before it)",
    "sync_after_detail": "{reads} in {nsteps} step{s}: the host waited {seconds} for the value",
    "sync_fix_value": "keep the value as a tensor on the device (accumulate it there) and read "
                      "it every N steps or after the loop; a jitted step can return it with "
                      "the other outputs",
    "sync_fix_branch": "keep the decision on the device (torch.where / jnp.where, masking), or "
                       "check the value every N steps",
    "extra_fallbacks": "torchax has no lowering for {ops} (OperatorNotFound, {n}x)",
    "fallback_detail": "{op} has no torchax lowering (torchax raised OperatorNotFound{via}): "
                       "the program stopped here",
    "fallback_fix": "replace {op} with ops torchax lowers: {replacement}",
    "fallback_fix_generic": "replace the call with ops torchax lowers, or register a lowering "
                            "for the op (env.override_op_definition(op, jax_function) or "
                            "torchax.ops' register functions)",
}
