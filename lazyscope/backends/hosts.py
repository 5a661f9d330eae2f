"""Which host of a pod this process is, as torch_xla has it, and the start of a run's part at
a URL (``--out gs://bucket/run``: :mod:`lazyscope.store.remote`).

Host identity: ``torch_xla.runtime.host_index()`` on TPU, asked only once the program has
started torch_xla's runtime (lazyscope never starts it first); before that, and on every other
device, ``CLOUD_TPU_TASK_ID`` (or ``TPU_WORKER_ID``) when set (so processes of one machine pose
as hosts in tests), else 0. On a TPU with neither variable set the host is not known until the
runtime is up: the part waits in its spool until then.

How many hosts the pod has, as its launcher says (:func:`launcher_hosts`): the names in
``TPU_WORKER_HOSTNAMES`` (a TPU pod's workers), else torchrun's ``GROUP_WORLD_SIZE`` (its nodes),
else ``WORLD_SIZE / LOCAL_WORLD_SIZE``; each host's uploader writes it into its heartbeat, so a
reader knows a host that never uploaded anything is missing.
"""

from __future__ import annotations

import os
import sys

from lazyscope.core.numbers import parse_int
from lazyscope.store.remote import (
    Spool,
    Uploader,
    beat_seconds,
    claim_part,
    open_fs,
    probe_bucket,
    release_claim,
    upload_seconds,
)

HOST_ENV = ("CLOUD_TPU_TASK_ID", "TPU_WORKER_ID")


def _on_tpu() -> bool:
    return os.environ.get("PJRT_DEVICE", "").upper() == "TPU"


#: the largest host index taken from the environment
MAX_HOST = 1 << 20


def _env_host() -> int | None:
    """The host index the environment gives (the first variable of :data:`HOST_ENV` set), None
    when none is set; a value that is no host index (``abc``, ``-1``, ``²``) is a
    ``BadNumber`` (exit 2), never host 0."""
    for name in HOST_ENV:
        value = os.environ.get(name, "")
        if value.strip():
            return parse_int(value, f"{name} (the host index)", minimum=0, maximum=MAX_HOST)
    return None


def host_index() -> int | None:
    """This process's host index (see the module docstring); None on a TPU whose runtime the
    program has not started yet, when no variable says it."""
    if _on_tpu() and "torch_xla" in sys.modules:
        try:
            import torch_xla
            import torch_xla.runtime as xr

            if torch_xla._XLAC._xla_runtime_is_initialized():
                return int(xr.host_index())
        except Exception:  # noqa: BLE001 - an older torch_xla: the variables below
            pass
    found = _env_host()
    if found is not None:
        return found
    return None if _on_tpu() else 0


def _positive(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def launcher_hosts() -> tuple[int, str] | None:
    """``(hosts, where that was read)``: how many hosts the launcher started (see the module
    docstring), None when nothing says."""
    names = [n for n in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if n.strip()]
    if names:
        return len(names), "TPU_WORKER_HOSTNAMES"
    nodes = _positive("GROUP_WORLD_SIZE")
    if nodes is not None:
        return nodes, "GROUP_WORLD_SIZE"
    world, local = _positive("WORLD_SIZE"), _positive("LOCAL_WORLD_SIZE")
    if world is not None and local is not None and world % local == 0:
        return world // local, "WORLD_SIZE / LOCAL_WORLD_SIZE"
    return None


def start_part(url: str, *, force: bool) -> Uploader:
    """The spool and uploader of this host's part of the run at ``url``, checked before the
    program starts: a URL with no bucket, a bucket that does not exist or cannot be written, a
    host index the environment gives wrong (``abc``, ``-1``) are one line each; the host's part
    is claimed in the bucket (:func:`~lazyscope.store.remote.claim_part`): a part another trace
    of the same host index writes is refused, and so is one that holds a run already (unless
    ``force``). A host not known yet (a TPU whose runtime is not up) is claimed once known."""
    host = host_index()
    interval = upload_seconds()
    if host is None:
        probe_bucket(url)
        claim = None
    else:
        _, claim = claim_part(url, host, force=force, every=beat_seconds(interval))
    try:
        spool = Spool.create(url, host)
    except BaseException:
        if claim is not None:
            release_claim(open_fs(url)[0], claim)
        raise
    return Uploader(spool, host=host_index, interval=interval, claim=claim, force=force,
                    hosts=launcher_hosts())
