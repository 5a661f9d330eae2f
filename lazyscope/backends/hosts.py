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

from lazyscope.core.errors import RunDirError, one_line
from lazyscope.store.remote import Spool, Uploader, host_dir_name, open_fs

HOST_ENV = ("CLOUD_TPU_TASK_ID", "TPU_WORKER_ID")


def _on_tpu() -> bool:
    return os.environ.get("PJRT_DEVICE", "").upper() == "TPU"


def _env_host() -> int | None:
    for name in HOST_ENV:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
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
    """The spool and uploader of this host's part of the run at ``url``. A part the host wrote
    there before is refused (``--force`` replaces it), when the host is known now."""
    host = host_index()
    if host is not None:
        fs, root = open_fs(url)
        where = f"{root}/{host_dir_name(host)}"
        try:
            taken = bool(fs.exists(where))
        except FileNotFoundError:
            taken = False
        except Exception as err:  # noqa: BLE001 - the filesystem's own error, one line
            raise RunDirError(f"cannot reach {url}: {type(err).__name__}: "
                              f"{one_line(str(err), 300)}") from None
        if taken:
            if not force:
                raise RunDirError(f"{url.rstrip('/')}/{host_dir_name(host)} already holds this "
                                  "host's part of a run: use --force to replace it, or another "
                                  "URL")
            fs.rm(where, recursive=True)
    spool = Spool.create(url, host)
    return Uploader(spool, host=host_index, hosts=launcher_hosts())
