"""The torch_xla backend.

Modules: ``collector`` (the collector: steps at the program's own barriers, metric deltas,
compile events), ``runtime`` (what scenarios run on), ``barrier`` and ``causes`` (which syncs
are the program's steps, which frames mean what), ``metrics`` (torch_xla's metrics as per-step
deltas), ``debugfile`` (PT_XLA_DEBUG_FILE), ``hlo`` and ``dump`` (XLA's HLO dump: each graph's
inputs and source lines), ``sources`` (IR-debug switching, held compile events), ``reads``
(value reads by Python), ``watch`` (the call-site watch window for CPU fallbacks and hidden
syncs), ``spawn`` (``xmp.spawn`` / ``torch_xla.launch`` workers) and ``wording`` (the
sentences of XLA reports, plain data).

Importing this package imports nothing: torch_xla is imported by the collector when it starts.
"""
