"""The persistent compilation caches a run could use, and what they did: the run's
``compile_cache`` info (:data:`COMPILE_CACHE`).

* XLA: torch_xla's persistent cache, configured by ``torch_xla.runtime.initialize_cache(path)``
  (it sets ``XLA_PERSISTENT_CACHE_PATH`` before the first computation). Its hits, misses, loads
  and failed loads are torch_xla's own counters (``PersistentCacheHit`` ...).
* torch.compile: inductor's FX graph cache (on by default, ``TORCHINDUCTOR_FX_GRAPH_CACHE``),
  in ``TORCHINDUCTOR_CACHE_DIR`` (default ``/tmp/torchinductor_<user>``); its hits and misses
  are dynamo's own counters (``fxgraph_cache_hit`` / ``_miss`` / ``_bypass``), AOTAutograd's
  too (``autograd_cache_hit`` / ``_miss``).

Each records the directory and how many entries it held when the program first needed it (an
empty or new directory explains every miss), and the counters' change over the trace. Reading
a directory is bounded (:data:`MAX_ENTRIES`); nothing here starts a runtime: torch_xla's
counters are read from its metrics registry, the environment at the program's first barrier.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
import tempfile
from typing import Any

#: the run info key
COMPILE_CACHE = "compile_cache"
#: entries of a cache directory counted at most
MAX_ENTRIES = 100_000
XLA_COUNTERS = {"hits": "PersistentCacheHit", "misses": "PersistentCacheMiss",
                "loads": "PersistentCacheLoad", "failed_loads": "PersistentCacheDeserializeFailure"}
INDUCTOR_COUNTERS = {"hits": ("inductor", "fxgraph_cache_hit"),
                     "misses": ("inductor", "fxgraph_cache_miss"),
                     "bypasses": ("inductor", "fxgraph_cache_bypass"),
                     "autograd_hits": ("aot_autograd", "autograd_cache_hit"),
                     "autograd_misses": ("aot_autograd", "autograd_cache_miss")}


def count_entries(path: str | None) -> int | None:
    """Files under ``path`` (at most :data:`MAX_ENTRIES`); None when there is no such
    directory."""
    if not path or not os.path.isdir(path):
        return None
    n = 0
    for _root, _dirs, files in os.walk(path):
        n += len(files)
        if n >= MAX_ENTRIES:
            break
    return n


class XlaCache:
    """torch_xla's persistent cache over a trace."""

    def __init__(self, met: Any):
        self._met = met
        self._base = self._counts()
        self.info: dict[str, Any] | None = None

    def _counts(self) -> dict[str, int]:
        out = {}
        for key, name in XLA_COUNTERS.items():
            try:
                out[key] = int(self._met.counter_value(name) or 0)
            except Exception:  # noqa: BLE001 - another torch_xla: not counted
                out[key] = 0
        return out

    def first_use(self) -> None:
        """The program's first barrier, before it runs: the cache as the program set it up."""
        if self.info is not None:
            return
        path = os.environ.get("XLA_PERSISTENT_CACHE_PATH") or None
        self.info = {"kind": "xla", "configured": path is not None, "path": path,
                     "readonly": os.environ.get("XLA_PERSISTENT_CACHE_READ_ONLY") == "1",
                     "entries_before": count_entries(path)}

    def result(self) -> dict[str, Any]:
        self.first_use()
        assert self.info is not None
        now = self._counts()
        return {**self.info, **{k: now[k] - self._base.get(k, 0) for k in now}}


class InductorCache:
    """inductor's FX graph cache over a trace. Nothing is imported here: torch's inductor
    loads in seconds, and a program that compiles nothing has no cache to say about; the
    counters start at the ones already counted in this process (a second trace of it)."""

    def __init__(self) -> None:
        self._base = self._counts()
        self.path = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or _default_inductor_dir()
        self.entries_before = count_entries(self.path)

    @staticmethod
    def _counts() -> dict[str, int]:
        utils = sys.modules.get("torch._dynamo.utils")
        counters = getattr(utils, "counters", None)
        if counters is None:
            return {}
        return {key: int(counters[group][name]) for key, (group, name)
                in INDUCTOR_COUNTERS.items()}

    def result(self) -> dict[str, Any] | None:
        """What the cache did, or None when the program compiled nothing with inductor."""
        config = sys.modules.get("torch._inductor.config")
        if config is None:
            return None
        now = self._counts()
        return {"kind": "inductor", "configured": bool(getattr(config, "fx_graph_cache", False)),
                "path": self.path, "entries_before": self.entries_before,
                **{k: now.get(k, 0) - self._base.get(k, 0) for k in INDUCTOR_COUNTERS}}


def _default_inductor_dir() -> str:
    """inductor's default cache directory, as ``cache_dir_utils.default_cache_dir`` names it
    (without calling it: its ``cache_dir()`` sets the environment and makes the directory)."""
    user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
