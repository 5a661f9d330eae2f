"""What ran on the CPU? Per ``aten::`` op without a lowering: its executions (exact, from the
backend's per-step counts: ``fallback_exec`` events), the steps it ran in, and its user call
sites (``fallback`` events: calls seen by the collector's watcher, with the Python call during
which the op ran). An op the watcher never saw (it ran only in steps it did not look at) is
placed at the user's line through which most reads inside a library in the same steps went:
the library call it ran in (:func:`_library_call_site`). The time is estimated from the fastest sampled call times the executions.
Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyscope.analyze.events import distinct, group_events
from lazyscope.model import Fallback, FallbackExec, Frame, Run, Stack, user_frames, user_site

#: op base name -> a concrete replacement
REPLACEMENTS = {
    "histc": "count with lowered ops: ((x[..., None] >= edges[:-1]) & (x[..., None] < edges[1:]))"
             ".sum(...), or compute the histogram outside the step",
    "bucketize": "compare against the boundaries with lowered ops: (x[..., None] >= b).sum(-1)",
    "searchsorted": "compare against the sorted values with lowered ops: "
                    "(x[..., None] >= s).sum(-1)",
    "median": "use torch.sort or torch.kthvalue (lowered) instead of median",
    "nanmedian": "mask NaNs and use torch.kthvalue (lowered)",
    "_unique2": "avoid torch.unique in the step (data-dependent size); use a fixed-size mask",
    "unique_dim": "avoid torch.unique in the step (data-dependent size); use a fixed-size mask",
    "mode": "compute the mode outside the step or with one-hot counts and argmax",
    "nonzero": "boolean indexing (x[mask]) has a data-dependent size: use torch.where(mask, x, "
               "0) or multiply by the mask, keeping the shape fixed",
    "masked_select": "x[mask] has a data-dependent size: use torch.where(mask, x, 0) and keep "
                     "the shape fixed",
    "_fft_r2c": "FFTs have no XLA lowering: compute the spectrogram outside the step, "
                "or express it as a matmul with a precomputed DFT matrix",
    "_fft_c2r": "FFTs have no XLA lowering: compute it outside the step, or as a matmul "
                "with a precomputed DFT matrix",
    "_fft_c2c": "FFTs have no XLA lowering: compute it outside the step, or as a matmul "
                "with a precomputed DFT matrix",
    "linalg_eig": "eigendecomposition of general matrices is not lowered: use torch.linalg.eigh "
                  "for symmetric matrices, or compute it outside the step",
    "_adaptive_avg_pool2d": "use nn.AvgPool2d with a fixed kernel (input size / output size), "
                            "or an output size that divides the input size",
    "_adaptive_avg_pool2d_backward": "use nn.AvgPool2d with a fixed kernel (input size / output "
                                     "size), or an output size that divides the input size",
    # F.interpolate is lowered forward, not backward (checked on torch_xla 2.9): upsampling
    # written with ops lowered both ways
    "upsample_bilinear2d_backward": "upsample with ops lowered both ways: nn.ConvTranspose2d("
                                    "c, c, 2, stride=2), or nearest-neighbour by expand: "
                                    "h[:, :, :, None, :, None].expand(n, c, H, 2, W, 2)"
                                    ".reshape(n, c, 2 * H, 2 * W)",
    "upsample_nearest2d_backward": "upsample by expand (lowered both ways): "
                                   "h[:, :, :, None, :, None].expand(n, c, H, 2, W, 2)"
                                   ".reshape(n, c, 2 * H, 2 * W), or nn.ConvTranspose2d",
    "upsample_bicubic2d": "bicubic upsampling is not lowered: use bilinear or nearest (lowered "
                          "forward), or nn.ConvTranspose2d",
}


def op_base(op: str) -> str:
    """``aten::median.dim_values`` -> ``median``; ``aten::add_`` -> ``add``."""
    base = op.split("::", 1)[-1].split(".", 1)[0]
    return base.rstrip("_") or base


@dataclass
class FallbackSite:
    site: Frame | None
    stack: Stack
    calls: int
    seconds: float
    via: str
    backward: bool
    #: the package it ran inside, when placed at the user's call into it
    #: (:func:`_library_call_site`); "" when the op's own call was seen
    library: str = ""


@dataclass
class FallbackOp:
    op: str
    count: int = 0
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sites: list[FallbackSite] = field(default_factory=list)
    fastest_call_s: float | None = None

    @property
    def base(self) -> str:
        return op_base(self.op)

    @property
    def site(self) -> FallbackSite | None:
        return max(self.sites, key=lambda s: s.calls) if self.sites else None

    @property
    def seconds(self) -> float:
        """Estimated CPU time: the fastest sampled mean call time x executions (an op's first
        call also pays one-off costs, so the mean of all samples overstates)."""
        return (self.fastest_call_s or 0.0) * self.count

    def replacement(self) -> str | None:
        return REPLACEMENTS.get(self.base) or REPLACEMENTS.get(self.op.split("::", 1)[-1]
                                                                .split(".", 1)[0])


def fallback_ops(run: Run) -> list[FallbackOp]:
    """One entry per fallback op, the most executed first."""
    ev = run.events
    ops: dict[str, FallbackOp] = {}

    def by_op(_stack: Stack, data: FallbackExec | None) -> str | None:
        return data.op if data is not None else None

    for op, sel in group_events(ev, "fallback_exec", by_op):
        entry = ops.setdefault(str(op), FallbackOp(str(op)))
        entry.count += int(ev.value[sel].sum())
        entry.steps = distinct(np.concatenate((entry.steps, ev.step[sel])))

    def by_site(stack: Stack, data: Fallback | None) -> tuple[Any, ...] | None:
        if data is None:
            return None
        site = user_site(stack)
        return data.op, (site.file, site.line, site.function) if site else None, data.via, \
            data.backward

    for (op, where, via, backward), sel in group_events(ev, "fallback", by_site):
        entry = ops.setdefault(str(op), FallbackOp(str(op)))
        calls = ev.value[sel]
        seconds = ev.seconds[sel]
        stack = ev.stack_of(int(ev.stack[sel[0]]))
        entry.sites.append(FallbackSite(
            Frame(*where) if where else None, tuple(user_frames(stack)),
            int(calls.sum()), float(seconds.sum()), str(via), bool(backward)))
        with np.errstate(divide="ignore", invalid="ignore"):
            per_call = np.where(calls > 0, seconds / np.maximum(calls, 1), np.inf)
        fastest = float(per_call.min()) if len(per_call) else None
        if fastest is not None and np.isfinite(fastest) and (
                entry.fastest_call_s is None or fastest < entry.fastest_call_s):
            entry.fastest_call_s = fastest
    for entry in ops.values():
        if not entry.sites and entry.count:
            placed = _library_call_site(run, entry)
            if placed is not None:
                entry.sites.append(placed)
    return sorted(ops.values(), key=lambda o: (-o.count, o.op))


def _package(frame: Frame) -> str:
    parts = frame.file.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            return parts[parts.index(marker) + 1].removesuffix(".py")
    return "a library"


def _library_call_site(run: Run, op: FallbackOp) -> FallbackSite | None:
    """The user's line that called into the library an op without a site of its own ran in.
    The watch window names an op's line only in the steps it looks at (warm-up, the step after
    an op with no site): an op that ran only in later steps (an evaluation's ``generate()``,
    whose stopping criterion calls ``torch.isin``) is counted without one. The reads made
    inside a library in the same steps are recorded with their stacks: the user line that most
    of them went through is the call the op ran in, said as such (``via``)."""
    ev = run.events
    if ev.count("sync") == 0:
        return None
    steps = {int(s) for s in op.steps}
    found: dict[tuple[str, int, str], list[Any]] = {}
    for e in ev.iter("sync"):
        if e.step not in steps or not e.stack or not e.stack[0].library:
            continue
        site = user_site(e.stack)
        if site is None:
            continue
        key = (site.file, site.line, site.function)
        hit = found.setdefault(key, [0, e.stack])
        hit[0] += 1
    if not found:
        return None
    (file, line, function), (reads, stack) = max(found.items(), key=lambda kv: kv[1][0])
    package = _package(stack[0])
    return FallbackSite(Frame(file, line, function), tuple(user_frames(stack)), op.count, 0.0,
                        f"{package}: placed where {reads} reads inside it in the same steps "
                        "went through", False, package)
