"""Every sentence lazyscope says about a run: the neutral table here, and each backend's own
words in its package (``lazyscope/backends/<name>/wording.py``).

The analyzers decide *what* is true (which line, which input, how often, how long); the wording
decides how to say it for the backend that produced the run, so an XLA sentence
(``xm.add_step_closure``, "device-to-host transfers", ``XLA_FLAGS``) never reaches a
torch.compile run, and a new backend is one collector plus one wording module.

``say(backend, key, **values)`` formats the backend's template for ``key``. :data:`BASE` holds
every key in neutral words (a run of an unknown backend is said in them); a backend's table is
:data:`BASE` with its overrides. ``tests/unit/test_wording.py`` renders every key of every table
and checks that no XLA word reaches another backend's.
"""

from __future__ import annotations

from typing import Any

from lazyscope.analyze.wording import pytorch as pytorch_words
from lazyscope.analyze.wording import torchax as torchax_words
from lazyscope.analyze.wording import xla as xla_words

BASE: dict[str, str] = {
    # verdicts
    "verdict_no_steps": "no step barrier was reached: nothing to time per step",
    "verdict_clean": "no recompilation in steady state: compiled code is reused "
                     "({compiles} compilation{s} in all)",
    "verdict_recompiling": "recompiles in steady state: {count} recompilation{s} at {sites} "
                           "site{ss} ({what})",
    "verdict_only_notes": "no recompilation in steady state ({compiles} compilation{s} in all; "
                          "{notes} note{ns} below)",
    "verdict_no_compile": "no compilation: the program ran eagerly",
    "verdict_unexplained": "compile causes unknown: {compiles} compilation{s} counted, none "
                           "recorded with its graph and cause (see the notes), so recompilation "
                           "cannot be judged",
    "verdict_eager_mode": "eager mode: each op ran on its own ({compiles} compilations, "
                          "{executions} executions)",
    "verdict_idle": "the run did no work: {why} (its times measure nothing: look for a "
                    "data pipeline that ended, or a loop that was skipped)",
    "extra_fallbacks": "{n} CPU fallback op executions ({ops})",
    "extra_syncs": "{n} host syncs",
    "extra_breaks": "{n} graph break{s}",
    "extra_eager": "{n} function{s} fell back to eager (recompile limit)",
    "extra_findings": "{n} finding{s}",
    "verdict_no_barrier": "no step barrier in the loop at {loop}: its iterations were traced "
                          "into one graph of {ops} ops, compiled once at {site}",
    # a loop with no barrier
    "no_barrier_detail": "the loop at {loop} ends no step: every iteration added its work to "
                         "one pending graph, compiled once when {site} read a value after the "
                         "loop: {ops} ops, {inputs} inputs{memory}, {seconds} to compile"
                         "{made}{steps}; it grows with the iterations (a longer run compiles a "
                         "larger graph, until it no longer fits in memory)",
    "no_barrier_made": "; {n} of its inputs were made inside the loop, one per iteration",
    "no_barrier_steps": "; the run reached no step barrier at all (steps 0)",
    "no_barrier_fix": "end every iteration of the loop at {loop} with a step barrier, so each "
                      "iteration compiles one graph once and reuses it",
    # recompiles
    "recompile_detail": "{where} compiled {graphs} graph{s} ({counted} recompilation{cs} after "
                        "its first graph{fs}){reasons}",
    "recompile_note_detail": "{where} recompiled once at step {step}: {changes}",
    "recompile_notes_detail": "{where} recompiled {n} times after warm-up, at steps {steps} "
                              "(first at step {step}: {changes})",
    "fix_batch_dim": "the last batch is smaller than the others: drop it "
                     "(DataLoader(..., drop_last=True)) or pad it to the full batch size",
    "fix_growing": "{dims} grows at every compilation ({values}): its size follows the step "
                   "(a tensor concatenated onto at every step, a length computed from the step "
                   "number, a slice up to the step); keep it at a fixed size: preallocate the "
                   "maximum and write or mask by index, or keep a running sum",
    "fix_dtype": "{inputs} changes dtype between graphs: cast it once, before the step, so "
                 "every step sees one dtype",
    "fix_growing_inputs": "{inputs} enters the compiled code once more at every step at "
                          "{where} (a Python list of device tensors stacked or concatenated "
                          "before the step ends: every step is code never run before): keep a "
                          "running value on the device (total += x.detach()), or a fixed-size "
                          "buffer written at an index held on the device "
                          "(buf.index_copy_(0, i, x), i a device tensor), or stack the list "
                          "once, after the loop",
    "fix_count_inputs": "the number of {inputs}s changes between steps at {where} (a list of "
                        "device tensors of changing length): give the code the same number of "
                        "tensors every step (a fixed-size buffer, padded with zeros)",
    "fix_count": "the compiled code's inputs change (a tensor enters it only in some steps): "
                 "pass the same tensors every step",
    "fix_unknown": "compare the compiled graphs to see what changes",
    "late_bucket_fix": "a new size ({changes}) first met at step {step}, after the {graphs} "
                       "graphs compiled before it were each reused (the bucketing works): if it "
                       "is one of your buckets, compile every bucket before the loop (one batch "
                       "padded to each size) so that no compilation lands mid-run; if not, pad "
                       "it to one",
    "late_switch_fix": "the size changed at step {step} ({changes}) and kept its new value "
                       "since (compiled once more, then reused): if it is not meant to change, "
                       "make it fixed at {where}; each further change compiles once more",
    "late_multiple_fix": "a new size ({changes}) first met at step {step}, already padded to a "
                         "multiple of {multiple} (a bucket): nothing to pad; to keep the "
                         "compilation out of the run, compile every bucket before the loop (one "
                         "batch padded to each size)",
    "recompile_runs": "each graph ran {runs}",
    "maker_detail": "the sizes are made by {name}{made}: its batches' {tensor} took {n} sizes "
                    "in {batches} batches",
    "fix_maker_collate": "pad to a few fixed lengths in {name} ({where}) instead of each "
                         "batch's longest: e.g. round the length up to a multiple of {multiple} "
                         "(F.pad(x, (0, -x.shape[{dim}] % {multiple}))): {shapes} for the sizes "
                         "seen ({lo}..{hi}); or wrap it, lazyscope.data.Bucketed({name}, "
                         "[...]), which keeps what it does and pads its batches to a few "
                         "lengths (see `lazyscope advise RUN --emit`)",
    "fix_maker_hf": "{short} pads each batch to its longest example, a new shape for almost "
                    "every batch: pad to a multiple instead, add pad_to_multiple_of={multiple} "
                    "to the {short}(...) {where} ({shapes} for the sizes seen, "
                    "{lo}..{hi}){one_length}: it keeps everything else the collator does; "
                    "{sampler} keeps the padding small",
    "fix_maker_hf_one_length": ", or to one length, padding=\"max_length\", max_length={top}",
    "fix_maker_wrap": "{short} pads each batch to its longest example, a new shape for almost "
                      "every batch{untold}: wrap it, lazyscope.data.Bucketed(<the {short} "
                      "{where}>, {buckets}) pads what it returns to a few fixed lengths "
                      "({shapes} for the sizes seen, {lo}..{hi}) and keeps everything else it "
                      "makes (masking, labels, extra fields, the batch's type); see `lazyscope "
                      "advise RUN --emit`",
    "fix_maker_loader": "the batches are made by {name} in the DataLoader made at {where}: "
                        "give it a collate_fn that pads to a few fixed lengths "
                        "(lazyscope.data.PadToBuckets; see `lazyscope advise RUN`), or pad "
                        "the items to one length",
    "generate_detail": "generate() called at {where} compiled {graphs} graphs in {calls} "
                       "calls (~{per} a call){once}, {new} of them first met after its first "
                       "call: each generated token cuts new graphs (the cache grows by a "
                       "token, the stopping check reads a value) and a prompt of another "
                       "length makes the next call's graphs new too; {seconds} of compiling, "
                       "{share} of the run's time",
    "generate_fix": "give generate() one cache size and one input shape, as transformers "
                    "documents for compiled generation: a static cache, model.generate(..., "
                    "cache_implementation=\"static\") (a StaticCache sized once; "
                    "generation_config.max_cache_len for calls of several lengths), prompts "
                    "padded to one length (tokenizer(..., padding=\"max_length\", "
                    "max_length=N), or pad_to_multiple_of) and a fixed max_new_tokens: the "
                    "first call compiles its graphs, the next calls reuse them",
    "recompile_outlook": "new graphs keep coming ({new_late} of the {graphs} first met in the "
                         "run's second half, {once} run only once): expect ~{expected} more "
                         "graph{es} over the {horizon}, ~{cost} of compiling at the {each} each measured here "
                         "(adding {share} to those steps' own time)",
    "value_set_detail": "the value is set at {where}",
    "constant_set_detail": "the number is set at {set_at} and compiled in as a constant",
    "value_guard_detail": "{name} is set at {set_at} and read by the compiled function at "
                          "{read_at}",
    "sync_inside_library": "the read happens inside {library}, at {where}",
    "sync_fix_api": "{api} reads the value on the host at every call: call it every N steps, "
                    "or keep the value on the device and read it after the loop",
    "sync_fix_handed": "your line at {where} hands the tensor to {library}, which turns it into "
                       "text or a number ({read}: the host waits for the device each time): "
                       "hand {library} a Python number instead, read every N steps "
                       "(loss.item() every N steps), or a float kept on the host",
    "sync_fix_library": "the read is {library}'s own code ({where}), not a line of yours: look "
                        "for an argument or setting of {library} that avoids it (its "
                        "documentation), or accept the cost",
    "library_compiles": "{n} compiled by library code (not the program's; not findings)",
    "reuse_detail": "{what}: {graphs} graphs compiled at {where}, each reused (run {runs}"
                    "): a few fixed shapes, bucketing that works",
    "reuse_declared_detail": "{what}: {graphs} graphs compiled at {where} (run {runs}), one "
                             "per bucket met of the {buckets} the program pads to ({sizes}): "
                             "bucketing; a bucket first met late is compiled then, once",
    "reuse_fix": "nothing to change; the compilations are warm-up",
    "fix_dims": "pad {dims} to a few fixed bucket sizes instead of each batch's own size "
                "(see `lazyscope advise RUN`)",
    "fix_dims_where": "{dims} takes a new size at {where}: pad it to a few fixed bucket sizes "
                      "there (see `lazyscope advise RUN`)",
    "fix_dynamic_now": "{dims} became dynamic after this recompilation: no further recompiles "
                       "for it",
    "fix_value": "the compiled code specialised on the value of {inputs}: pass it as a tensor",
    "fix_break_value": "a Python number crosses a graph break and each new value compiles "
                       "the code after it again: remove the graph break",
    "fix_size": "the size made at {call} comes from a Python number set at {set_at}: each new "
                "value is a new shape inside the graph, and a size cannot be a device tensor; "
                "take it from a few fixed sizes (round the number up to a few buckets and mask "
                "the rest; for F.interpolate, size= from that set instead of scale_factor=) "
                "or keep it fixed",
    "fix_data_size": "{dims} is made from the data at {where} ({maker}: as many rows as "
                     "the mask keeps), so each new count is a new graph, and a size cannot be "
                     "a device tensor: keep the shape fixed, weighing by the mask instead of "
                     "selecting (x * mask, torch.where(mask, x, 0), a masked mean), or pad the "
                     "selection to a few fixed sizes",
    "fix_internal_size": "the size made at {where} changes between steps (a length from a "
                         "Python number: torch.arange(n), torch.randperm(n), "
                         "F.interpolate(scale_factor=s) ...), so each new size is a new graph, "
                         "and a size cannot be a device tensor: take it from a few fixed sizes "
                         "(pad to a few bucket lengths and mask the rest; for F.interpolate, "
                         "size= from that set instead of scale_factor=) or keep it fixed",
    "fix_constant": "a Python number is baked into the compiled code at {where}, so "
                    "each new value compiles it again: pass it as a tensor or keep it fixed",
    "fix_special_scalar": "a value that becomes 0 or 1 is compiled in as a constant: keep it a "
                          "tensor",
    "fix_cast": "only dtype conversions differ between the compiled graphs: a cast at {where} "
                "happens in some steps only; decide the precision once, before the loop",
    "fix_ops": "the traced operations differ between steps at {where}: keep Python branches on "
               "changing values out of the step",
    "fix_evicted": "the same code was compiled again after its compiled form was dropped: use "
                   "fewer shapes or a larger compile cache",
    "fix_identical": "identical code was compiled again: look for state that changes between "
                     "steps without changing the computation",
    "fix_no_shapes": "trace the program again with graph shapes recorded to see what changes",
    "fix_eager_ops": "each op runs on its own and is compiled again for each new shape: "
                     "compile the step as one function, and pad the shapes to a few buckets",
    "recompile_ops_detail": "{where}: ops run eagerly were compiled {compiles} times, {counted} "
                            "of them again for a new shape ({ops}){also}",
    "sync_forced": "",
    "sync_closure_detail": "{reads} after the step in {nsteps} step{s}: the host waited "
                           "{seconds} each time",
    "sync_closure_fix": "read the value every N steps",
    # host syncs
    "sync_detail": "{reads} in {nsteps} step{s}: the host waited {seconds} for the device",
    "sync_fix_branch": "keep the decision on the device (torch.where, masking) or check the "
                       "value every N steps",
    "sync_fix_value": "keep the value on the device (accumulate it there) and read it every N "
                      "steps or after the loop",
    "sync_after_detail": "{reads} in {nsteps} step{s}, of a value already computed (it cut no "
                         "graph): the host waited {seconds}",
    "sync_every": "it reads every {every} steps, {share}",
    "sync_price": "over {over} it costs {price}: the waits ({wait}) and the overlap "
                  "lost ({lost}: the host's own work of the steps that read, which ran while "
                  "the device idled instead of beside it)",
    "sync_fix_every": "it already reads only every N steps, and still costs the run: read it "
                      "less often, or keep the values on the device and read them after the loop",
    "sync_fix_every_cheap": "nothing to change: a read every N steps after the barrier cuts no "
                            "graph, and the host waits only for work the device was doing",
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
    "break_fix_context": "move the context manager out of the compiled function (or what breaks "
                         "the graph inside it: torch.compile cannot resume inside a context "
                         "manager it does not know, so it gives up on the whole function)",
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
    "fallback_detail": "{op} ran on the CPU {count} in {nsteps}{via}: its "
                       "inputs go to the host and its result back every time",
    "fallback_fix": "replace {op} with ops the backend lowers: {replacement}",
    "fallback_fix_library": "{op} runs inside {library}'s code, which this line calls, not "
                            "in a line of yours: look for an argument or setting of {library} "
                            "that avoids it (its documentation), or accept the cost",
    "fallback_fix_generic": "see the backend's lowered op list, or move the computation out of "
                            "the step",
    # memory
    "extra_aliasing": "{n} line{s} updating parameters out of place (buffers not donated)",
    "extra_growing": "{n} site{s} whose graphs grow step after step",
    "alias_detail": "the step graph compiled at {site} computes new values of its "
                    "input{s} {arrays} ({lost}) here, out of place: the buffer{s} cannot be "
                    "donated to the outputs, so old and new values are both held (the graph "
                    "updates {updated} of its inputs and aliases {aliased}; outputs {outputs})",
    "alias_fix": "update the tensor in place so its buffer is donated: `with torch.no_grad(): "
                 "w -= lr * w.grad` (or `w.sub_(...)`, `w.copy_(new)`, `state.mul_(b).add_(g)`) "
                 "instead of rebinding `w = (w - lr * w.grad).detach().requires_grad_()`; an "
                 "optimizer's own step() updates in place",
    "growth_detail": "the {n} graphs compiled at {site} from step {a} to step {b} each hold "
                     "more (inputs + intermediates: {first} -> {last}, {per} more per graph): "
                     "tensors are kept on the device across steps and fed back into the graph",
    # the same growth, said in a recompile finding whose growing shape explains it
    "growth_of_shape": "its graphs hold more as the shape grows (inputs + intermediates: "
                       "{first} -> {last}, {per} more per graph)",
    "growth_fix": "do not keep device tensors across steps in a growing list or torch.cat: "
                  "keep a fixed-size window or a running value (`total += loss.detach()`), or "
                  "move what must be kept to the host at the barrier",
    # the compile bill's cache (analyze/compilebill.py)
    "cache_none": "no persistent compilation cache: every new process compiles every graph "
                  "again",
    "cache_none_cheap": "no persistent compilation cache (compiling is a small part of this "
                        "run)",
    "cache_failed_loads": "persistent cache at {path}: {failed} failed to load "
                          "({hits}, {misses})",
    "cache_cold": "persistent cache at {path}: {misses}, {hits}; the directory was "
                  "empty when the program started: this run filled it, the next run of the same "
                  "program should hit",
    "cache_stale": "persistent cache at {path}: {misses}, {hits}, with {entries} "
                   "there at the start that did not match (the key holds the graph and "
                   "the compiler's settings and version)",
    "cache_hits": "persistent cache at {path}: {hits}, no miss: every graph came from "
                  "the cache",
    "cache_unused": "persistent cache at {path}: no lookup counted",
    # where the step's time goes (analyze/bound.py)
    "verdict_input_bound": "input-bound: the loop waits for its data {share} of each step",
    "verdict_host_bound": "host-bound: the host's own work takes {share} of each step and the "
                          "device idles",
    "verdict_syncs": "the step waits in host reads {share} of its time ({where})",
    "extra_input_bound": "input-bound ({share} of each step waiting for data)",
    "extra_host_bound": "host-bound ({share} of each step on the host)",
    "input_detail": "the loop waited {per_step} for its next batch in each {step} step ({share} "
                    "of the steady step: input wait) from {loader}",
    "input_sampled": "; sampled while it waited: {lines}",
    "input_fix_workers": "make the batches ahead of the step: DataLoader(..., num_workers={n}"
                         "{persist}{pin}) (a batch takes {batch} to make, the rest of the step "
                         "{rest}: {n} workers keep up)",
    "input_fix_more_workers": "its {have} worker{s_have} cannot keep up: raise num_workers to "
                              "{n}{persist}{pin}, or make {where} cheaper (it runs once a sample)",
    "input_fix_trainer": "make the Trainer's batches ahead of the step: "
                         "TrainingArguments(..., dataloader_num_workers={n}, "
                         "dataloader_persistent_workers=True{pin})",
    "input_fix_device_loader": "",
    "host_detail": "the host's own work takes {per_step} of each {step} step ({share}), the "
                   "device's {device}: the device idles about {idle} a step (host-bound)",
    "host_sampled": "; sampled: {lines} (by file: {files})",
    "host_fix": "do less on the host per step: fewer, larger operations, or more work per "
                "step (a larger batch) for the same host time",
    "host_fix_compiled": "do less on the host per step: fewer, larger operations, or more work "
                         "per step (a larger batch) for the same host time",
    "host_fix_trainer": "do less on the host per step: a larger per_device_train_batch_size "
                        "for the same host work per step",
    "host_fix_optimizer": "most of the host's time is the optimizer's step at {where}, one "
                          "update per parameter tensor: use its fused or foreach "
                          "implementation, or fewer, larger parameter tensors",
    # multi-rank
    "rank_diverges_graphs": "rank {rank} compiled {graphs} the other ranks did not: "
                            "ranks that trace different graphs wait for each other at every "
                            "collective (or hang)",
    "rank_diverges_time": "rank {rank}'s median step is {ratio:.2f}x the other ranks': a "
                          "straggler slows every collective",
}

TABLES: dict[str, dict[str, str]] = {
    "xla": {**BASE, **xla_words.WORDS},
    "compile": {**BASE, **pytorch_words.COMPILE},
    "eager": {**BASE, **pytorch_words.EAGER},
    "torchax": {**BASE, **torchax_words.WORDS},
}


def table(backend: str) -> dict[str, str]:
    """The wording table of ``backend`` (the neutral one for an unknown backend)."""
    return TABLES.get(backend, BASE)


def say(backend: str, key: str, **values: Any) -> str:
    """The backend's sentence ``key`` with ``values`` filled in."""
    return table(backend)[key].format(**values)


def plural(n: int, word: str = "s") -> str:
    """``"s"`` unless ``n`` is 1."""
    return "" if n == 1 else word
