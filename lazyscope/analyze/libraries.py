"""Known costs inside libraries, with the argument or setting that avoids them.

A host read (or another cost) that happens inside a library is the library's code, not a line of
the user's: the finding names the user's call and the library line where it happens. When the
library offers a way around it, this table says which, keyed by the library frame's file
(a path suffix) and function. Each entry was measured: the setting removed the read (device-to-
host transfers per step counted with torch_xla's metrics on XLA:CPU, transformers 5, GPT-2;
L-BFGS's reads, per iteration, in ``tests/programs/lbfgs_closure.py``).
Pure data and one lookup: no I/O.
"""

from __future__ import annotations

from lazyscope.model import Frame

#: (file suffix, function) -> what avoids the cost
LIBRARY_FIXES: dict[tuple[str, str], str] = {
    ("transformers/masking_utils.py", "find_packed_sequence_indices"):
        "transformers looks for packed sequences in position_ids at every forward when the "
        "batch has no attention_mask and there is no cache (GPT-2 always makes position_ids): "
        "TrainingArguments(use_cache=True), or an attention_mask with "
        "attn_implementation='eager', avoids the read (with SDPA and a mask it moves to "
        "_ignore_causal_mask_sdpa)",
    ("torch/optim/lbfgs.py", "step"):
        "torch.optim.LBFGS decides on the host: it reads the loss, the gradient norm and the "
        "line search's values at every iteration of its step (each read cuts the graph on "
        "XLA); fewer iterations (max_iter) read less, a first-order optimizer (Adam, SGD) "
        "reads nothing",
    ("transformers/trainer.py", "_maybe_log_save_evaluate"):
        "Trainer reads the loss and the gradient norm to log them every logging_steps steps: "
        "log less often (TrainingArguments(logging_steps=...)); the other steps read nothing",
    ("transformers/trainer_pt_utils.py", "nested_xla_mesh_reduce"):
        "Trainer gathers the loss across processes (xm.mesh_reduce) to log it every "
        "logging_steps steps: log less often (TrainingArguments(logging_steps=...))",
}


def library_fix(frame: Frame | None) -> str | None:
    """What avoids a cost that happens at ``frame`` (a library frame), when known."""
    if frame is None:
        return None
    file = frame.file.replace("\\", "/")
    for (suffix, function), fix in LIBRARY_FIXES.items():
        if file.endswith(suffix) and frame.function == function:
            return fix
    return None
