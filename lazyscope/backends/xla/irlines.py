"""The user lines of each compiled graph's ops and inputs, from torch_xla's IR debug.

torch_xla records the Python line of every IR node while its IR debug flag is on; XLA's HLO
dump then carries each op's ``source_file``/``source_line``, so a recompiled graph says which
user line made each input and op. The flag costs tracing time (+3% to +20% per step on a small
MLP, measured), so :class:`SourceLines` switches it at run time: on in warm-up and in every step
after a step that compiled, off in steady state (graph hashes do not change with it).

A graph compiled in a steady step (flag off) has no lines: its compile event is *held* until
the next barrier, which traces the same program with the flag on; there, before the program's
sync, :meth:`SourceLines.probe` lowers the pending graph of the device's live tensors to HLO text
(no compilation, no execution) and, when it has exactly the held graph's inputs, the held graph
takes its per-line digests and input origins. At most :data:`MAX_PROBES` probes per run.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from lazyscope.backends.base import Recorder
from lazyscope.backends.xla.hlo import HloModuleInfo, parse_module, parse_stacks
from lazyscope.model import OWNER_USER, Compile, Stack
from lazyscope.model.ownership import make_frame

#: graphs compiled without source lines whose program is lowered again with them, per run
MAX_PROBES = 8


class SourceLines:
    """IR-debug switching and the held compile events of one trace (see the module docstring).

    ``on``: source lines are recorded in the IR of the step in progress; ``saved``: the flag
    before the trace (None when lazyscope does not switch it: the user keeps it on by env, or
    graph shapes are off)."""

    def __init__(self) -> None:
        self.on = False
        self.saved: bool | None = None
        self.held: list[tuple[Compile, float, Stack, str, int]] = []
        self.probes = 0

    def start(self, xlac: Any, enabled: bool) -> None:
        """Switch source lines on for warm-up (``xlac``: ``torch_xla._XLAC``)."""
        if not enabled or not hasattr(xlac, "_set_ir_debug"):
            return
        if any(os.environ.get(v, "0") not in ("", "0") for v in ("XLA_IR_DEBUG",
                                                                 "XLA_HLO_DEBUG")):
            return  # the user keeps it on: leave it
        self.saved = bool(xlac._get_ir_debug())
        xlac._set_ir_debug(True)
        self.on = True

    def after_step(self, xlac: Any, *, compiled: bool, warm_up: bool) -> None:
        """At a barrier: lines on for the next step when this one compiled or warm-up goes on."""
        if self.saved is None:
            return
        on = compiled or warm_up
        if on != self.on:  # a steady run switches nothing at its barriers
            xlac._set_ir_debug(on)
            self.on = on

    def stop(self, xlac: Any) -> None:
        """Put the flag back as it was before the trace."""
        if self.saved is not None:
            xlac._set_ir_debug(self.saved)
            self.saved = None

    def hold(self, payload: Compile, seconds: float, stack: Stack, key: str, step: int) -> bool:
        """Hold a user graph compiled in a step traced without source lines (True), or let its
        event be recorded now (False)."""
        if self.on or self.saved is None or payload.owner != OWNER_USER or \
                payload.inputs is None or payload.lines or self.probes >= MAX_PROBES:
            return False
        self.held.append((payload, seconds, stack, key, step))
        return True

    def release(self, recorder: Recorder | None) -> None:
        """Record the held compile events (in the steps they happened in)."""
        held, self.held = self.held, []
        if recorder is None:
            return
        for payload, seconds, stack, key, step in held:
            recorder.event("compile", seconds=seconds, stack=stack, payload=payload, key=key,
                           step=step)

    def probe(self) -> None:
        """Give the held graphs the lines of the same program traced now (see the module
        docstring). Costs one lowering; best effort."""
        self.probes += 1
        found = lower_pending()
        if found is None or not found.lines:
            return
        sigs = Counter((d, tuple(sh)) for d, sh in found.inputs)
        origins: dict[tuple, list[tuple[str, int]]] = {}
        for i, (d, sh) in enumerate(found.inputs):
            if i in found.origins:
                origins.setdefault((d, tuple(sh)), []).append(found.origins[i])
        for payload, *_ in self.held:
            inputs = payload.inputs or []
            if Counter((i.dtype, tuple(i.shape)) for i in inputs) != sigs:
                continue  # another program: its line stays unknown
            payload.lines = [list(x) for x in found.lines]
            taken: dict[tuple, int] = {}
            for gi in inputs:
                sig = (gi.dtype, tuple(gi.shape))
                n = taken.get(sig, 0)
                at = origins.get(sig, [])
                if gi.origin is None and n < len(at):
                    gi.origin = make_frame(*at[n], "")
                taken[sig] = n + 1


def lower_pending() -> HloModuleInfo | None:
    """The HLO of the graph the next barrier would run: the default device's live tensors that
    still need computing (found by a walk of the garbage collector's objects), lowered to HLO
    text and parsed (:func:`~lazyscope.backends.xla.hlo.parse_module`). No compilation, no
    execution, no transfer; it waits for the step in flight (see below). None when nothing is
    pending or torch_xla refuses; best effort."""
    try:
        import gc

        import torch
        import torch_xla

        device = torch_xla._XLAC._xla_get_default_device()
        tensors = []
        for obj in gc.get_objects():
            if issubclass(type(obj), torch.Tensor):
                try:
                    if obj.device.type == "xla" and str(obj.device) == device:
                        tensors.append(obj)
                except Exception:  # noqa: BLE001 - exotic tensor subclasses
                    continue
        if not tensors:
            return None
        need = torch_xla._XLAC._check_tensor_need_materialization(tensors)
        pending = [t for t, n in zip(tensors, need, strict=True) if n]
        if not pending:
            return None
        # Lowering asks each input's data for its handle, and the inputs of this step are the
        # last one's outputs: placeholders that torch_xla's execution thread fills in when that
        # step finishes (an SPMD placeholder's handle is its first shard, moved in then;
        # reading it meanwhile crashed reads.py's hook). So the step in flight finishes first.
        torch_xla._XLAC._xla_wait_device_ops(devices=[])
        text = torch_xla._XLAC._get_xla_tensors_hlo(pending)
        try:  # the same graph as a proto: each instruction's whole Python stack
            stacks = parse_stacks(torch_xla._XLAC._get_xla_tensors_hlo_proto(pending))
        except Exception:  # noqa: BLE001 - an older torch_xla: the innermost frames only
            stacks = {}
        return parse_module(text, stacks=stacks)
    except Exception:  # noqa: BLE001 - best effort
        return None
