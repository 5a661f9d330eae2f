"""The real tokens a run trained on, measured: how much of what it computed was data, and how
many real tokens it processed per second (compilation included).

Two sources, the first that has them:

* the ``real_tokens`` step annotation (and ``computed_tokens``): exact, what the program said
  (``lazyscope.annotate_step(real_tokens=...)``; the built-in scenarios do);
* the batches of the run's main loader (the one that yielded the most), counted by the loader
  watch while they were still on the CPU (:func:`lazyscope.backends.loaders.batch_tokens`: an
  ``attention_mask``, packed rows' ``document_ids``, labels other than -100, or the nonzero
  ids of a ``(tokens, ...)`` tuple). Batch ``i`` is taken as step ``i``'s: the first ``steps``
  batches count (a loader that works ahead has made more than the steps used).

``real_tokens_per_second`` is the real tokens over the wall time of the steps that computed
them, their compilations included, lazyscope's own bookkeeping and the program's start (step
0's host time: imports, building the model) taken out
(:func:`~lazyscope.analyze.parts.training_s`: what the program's training gets untraced): what
a padding policy changes, and what ``lazyscope advise`` predicts (``real tok/s``). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazyscope.analyze.parts import training_s
from lazyscope.model import Run


@dataclass(frozen=True)
class Tokens:
    """Real and padded tokens over ``steps`` steps that took ``seconds`` (compiles included)."""

    real: int
    padded: int | None
    steps: int
    seconds: float
    source: str  # "annotations", or "loader batches (<how counted>)"

    @property
    def per_second(self) -> float | None:
        return self.real / self.seconds if self.seconds > 0 else None

    @property
    def padding_efficiency(self) -> float | None:
        return self.real / self.padded if self.padded else None


def _main_loader(loaders: Any) -> dict[str, Any] | None:
    if not isinstance(loaders, list):
        return None
    counted = [rec for rec in loaders if isinstance(rec, dict)
               and isinstance(rec.get("tokens"), dict)
               and isinstance(rec["tokens"].get("real_per_batch"), list)]
    if not counted:
        return None
    return max(counted, key=lambda rec: int(rec.get("batches") or 0))


def measured_tokens(run: Run) -> Tokens | None:
    """The run's measured tokens (module docstring), or None where neither source has them."""
    steps = run.steps
    n = len(steps)
    if n == 0:
        return None
    walls = training_s(run)
    annotated = steps.annotation("real_tokens")
    if annotated:
        computed = steps.annotation("computed_tokens")
        real = sum(int(v) for v in annotated.values())
        padded = sum(int(v) for v in computed.values()) if computed else None
        return Tokens(real, padded, n, float(walls.sum()), "annotations")
    rec = _main_loader(run.meta.run_info.loaders)
    if rec is None:
        return None
    tokens = rec["tokens"]
    real_b = [int(v) for v in tokens["real_per_batch"]]
    padded_b = [int(v) for v in tokens.get("padded_per_batch") or ()]
    k = min(n, len(real_b))
    if k == 0:
        return None
    return Tokens(sum(real_b[:k]), sum(padded_b[:k]) if len(padded_b) >= k else None, k,
                  float(walls[:k].sum()), f"loader batches ({tokens.get('counted_by', '?')})")
