"""A report's per-step series (:class:`Series`), in a module of its own: a plotter process
(:mod:`lazyscope.render.plotter`) unpickles one without importing the analysis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Series:
    """The per-step series, bucketed when the run has more than MAX_POINTS steps: point ``i``
    covers steps ``step[i] .. step[i] + size[i] - 1``."""

    step: np.ndarray
    size: np.ndarray
    wall_mean: np.ndarray
    wall_min: np.ndarray
    wall_max: np.ndarray
    compiles: np.ndarray
    compile_s: np.ndarray
    execute_s: np.ndarray | None
    transfer_s: np.ndarray | None
    cumulative_s: np.ndarray
    #: the step anatomy's parts summed per point (:mod:`lazyscope.analyze.anatomy`: input,
    #: host, compile, device, syncs, other), where the run measured them; what ``host`` is
    #: called on this backend (``tracing`` on XLA)
    parts: dict[str, np.ndarray] | None = None
    host_label: str = "host"

    @property
    def bucketed(self) -> bool:
        return bool(len(self.size)) and int(self.size.max()) > 1
