"""A run at a URL (``lazyscope trace --out gs://bucket/run``): every host writes its own part,
``URL/host<N>/``, without coordinating with the others; the URL is the run.

Writing. The step loop never waits for the bucket: a host's part is written to a local *spool*
directory exactly as a local run is (``$XDG_CACHE_HOME/lazyscope/spool/<id>/part/``, its ranks
under it as ``rank<N>/``), and an :class:`Uploader` copies what changed to ``URL/host<N>/``
from one background thread every :data:`UPLOAD_SECONDS`, and once more when the trace ends.
The spool's ``spool.json`` says whose it is (URL, host, pid) and whether it reached the bucket;
a trace killed before its last upload leaves it behind, and the next ``lazyscope`` command on
that host uploads what is left (:func:`recover_spools`), or says it is lost.

While the trace runs its uploader also rewrites ``URL/host<N>/upload.json`` (its heartbeat:
pid, machine, how often it beats, how many hosts the launcher started), at most every :func:`beat_seconds`, whether or not a step
changed anything (a loop that waits, or a long upload of one file, still beats); a final upload
writes it ``ended``. A reader tells a host still tracing from one that stopped by it without
talking to the host: the part's ``meta.json`` says running and the bucket stored the heartbeat
less than :func:`stale_after` ago (:func:`heard_from`); a host killed mid-run stops beating, and
after that long reads as stopped (``incomplete``).

The profile (``--profile``) is not kept in the part: XProf opens a joint view of the hosts of
one session, so each host's ``tensorboard/plugins/profile/<its time>/<hostname>.xplane.pb``
is uploaded as ``URL/tensorboard/plugins/profile/<session>/host<N>.xplane.pb`` with one session
name for every host, made from the URL (:func:`session_name`), never from a host's clock.

Reading. :func:`download` copies a URL's objects into a local cache directory
(``$XDG_CACHE_HOME/lazyscope/download/<id>/``), only those whose generation (GCS), ETag or size
and time changed since the last download, fetched concurrently; every reader then reads the
local copy as it reads a local run (a pod: ``host<N>/`` parts, see ``reader.load_target``).

The filesystems come from fsspec (``gs://`` through gcsfs, ``s3://`` through s3fs: the
``lazyscope[gcs]`` and ``lazyscope[s3]`` extras). ``file://`` URLs are local paths. With
``STORAGE_EMULATOR_HOST`` set (a GCS emulator) gcsfs connects anonymously.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lazyscope.core.errors import (
    MissingDependencyError,
    OutputError,
    RunDirError,
    UsageError,
    one_line,
    os_reason,
    show_path,
)
from lazyscope.core.numbers import MAX_SECONDS, parse_float
from lazyscope.store.layout import (
    ANNOTATIONS_FILE,
    ERROR_FILE,
    EVENTS_FILE,
    HOST_DIR,
    INTERN_FILE,
    LOCK_FILE,
    MANIFEST_FILE,
    META_FILE,
    STEPS_FILE,
    TENSORBOARD_DIR,
    UPLOAD_FILE,
    WRITE_TEST,
)
from lazyscope.store.rundir import rank_of

#: seconds between two background uploads of a host's part (``LAZYSCOPE_UPLOAD_SECONDS``
#: sets another)
UPLOAD_SECONDS = 5.0


#: the shortest period taken (a smaller one is this)
MIN_UPLOAD_SECONDS = 0.05


def upload_seconds() -> float:
    """The period of the background uploads: ``LAZYSCOPE_UPLOAD_SECONDS`` when set (seconds
    above 0, at least :data:`MIN_UPLOAD_SECONDS`), else :data:`UPLOAD_SECONDS`. A value that is
    no such number is a ``BadNumber`` (exit 2), raised before the program starts."""
    text = os.environ.get("LAZYSCOPE_UPLOAD_SECONDS", "")
    if not text.strip():
        return UPLOAD_SECONDS
    seconds = parse_float(text, "LAZYSCOPE_UPLOAD_SECONDS", above=0, maximum=MAX_SECONDS)
    return max(MIN_UPLOAD_SECONDS, seconds)


#: the shortest time between two heartbeats (GCS takes one write a second to an object)
MIN_BEAT_SECONDS = 1.0
#: heartbeats a reader waits for before it reads a host as stopped, and the seconds it allows
#: for its clock against the bucket's
STALE_BEATS = 3
CLOCK_SLACK_SECONDS = 3.0


def beat_seconds(interval: float) -> float:
    """How often an uploader ticking every ``interval`` seconds rewrites its heartbeat."""
    return max(MIN_BEAT_SECONDS, interval)


def stale_after(every: float) -> float:
    """How old a heartbeat written every ``every`` seconds is when its writer is gone."""
    return STALE_BEATS * every + CLOCK_SLACK_SECONDS


#: the spool's own record of whose it is
SPOOL_FILE = "spool.json"
#: the host's part inside a spool directory
PART_DIR = "part"
#: record files, compared by checksum (a run of an older lazyscope rewrote them in place)
MAPPED = frozenset({STEPS_FILE, EVENTS_FILE, INTERN_FILE, ANNOTATIONS_FILE})
#: files uploaded as the bytes their checksum was taken of, and listed in the part's manifest
#: with it (what a reader must see from one upload)
CHECKED = MAPPED | {META_FILE, ERROR_FILE}
#: files of a local run never uploaded (the lock means something on this machine only)
LOCAL_ONLY = frozenset({LOCK_FILE, WRITE_TEST})
#: where XProf writes a capture, and the suffixes of its files
PROFILE_DIR = "plugins/profile"
PROFILE_SUFFIXES = (".xplane.pb", ".trace.json.gz", ".memory_profile.json.gz")
#: the extra that installs each scheme's filesystem
EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3"}
#: how many objects one download fetches at once
DOWNLOAD_BATCH = 16
INDEX_FILE = ".lazyscope-download.json"

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def url_scheme(target: Any) -> str | None:
    """The scheme of a URL (``gs``), None for a local path. A ``pathlib.Path`` made of a URL
    (``gs:/b/r``: one slash lost) is no URL; commands take their run as text."""
    match = _SCHEME.match(str(target)) if isinstance(target, str) else None
    return match.group(1).lower() if match else None


def is_remote(target: Any) -> bool:
    """True for a URL that is not a local path (not ``file://``)."""
    scheme = url_scheme(target)
    return scheme is not None and scheme not in ("file", "local")


def local_path(target: str | os.PathLike[str]) -> Path:
    """A local path as given, or a ``file://`` URL's path."""
    text = os.fspath(target)
    if url_scheme(text) in ("file", "local"):
        return Path(text.split("://", 1)[1])
    return Path(text)


def normalise(url: str) -> str:
    return url.rstrip("/")


#: schemes whose URL names a bucket first (``gs://BUCKET/PATH``)
BUCKETED = frozenset({"gs", "gcs", "s3", "s3a"})
#: the loggers of the storage libraries: their retries are not lazyscope's lines (each error
#: reaches the user as one line where lazyscope called the storage)
STORAGE_LOGGERS = ("gcsfs", "s3fs", "fsspec", "aiobotocore", "botocore", "google")


def bucket_of(url: str) -> str:
    """The bucket a ``gs://``/``s3://`` URL names ("" for none: ``gs:///run``)."""
    rest = url.split("://", 1)[1] if "://" in url else ""
    return rest.split("/", 1)[0]


def _quiet_storage_logs() -> None:
    """A handler that drops the storage libraries' log records unless the program configured
    logging itself: without one, Python prints every gcsfs retry's traceback on stderr (the
    "last resort" handler), 50-100 lines for an unreachable server."""
    import logging

    for name in STORAGE_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
            log.addHandler(logging.NullHandler())


def open_fs(url: str) -> tuple[Any, str]:
    """``(filesystem, path)`` of ``url`` (fsspec); one line naming the extra to install when
    the scheme's filesystem is missing, or when a ``gs://``/``s3://`` URL names no bucket."""
    scheme = url_scheme(url) or ""
    if scheme in BUCKETED and not bucket_of(url):
        raise UsageError(f"{one_line(url)} names no bucket: write {scheme}://BUCKET/RUN")
    _quiet_storage_logs()
    try:
        import fsspec
    except ImportError:
        extra = EXTRAS.get(scheme, "gcs")
        raise MissingDependencyError(
            f"{url} needs fsspec: pip install 'lazyscope[{extra}]'") from None
    options: dict[str, Any] = {}
    if scheme in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        # an emulator: no credentials, and no gRPC bucket-type lookup it cannot answer (gcsfs
        # reads this when it is imported, and otherwise waits 60 s per bucket)
        options["token"] = "anon"
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        fs, path = fsspec.core.url_to_fs(normalise(url), **options)
    except ImportError:
        extra = EXTRAS.get(scheme)
        if extra is None:
            raise MissingDependencyError(
                f"{url}: fsspec has no installed filesystem for {scheme}://") from None
        package = "gcsfs" if extra == "gcs" else "s3fs"
        raise MissingDependencyError(
            f"{url} needs {package}: pip install 'lazyscope[{extra}]'") from None
    except ValueError as err:
        raise UsageError(f"{url}: {one_line(str(err))}") from None
    return fs, path.rstrip("/")


def storage_reason(err: BaseException, url: str, *, writing: bool = False) -> str:
    """Why a call to the storage failed, in a few words: a missing bucket, a permission, a
    server that does not answer, else the library's own one-line message."""
    text = one_line(str(err), 300)
    if isinstance(err, FileNotFoundError) and writing:
        return (f"the bucket {bucket_of(url)} does not exist (or these credentials cannot see "
                "it)")
    if isinstance(err, PermissionError) or "403" in text.split(" ", 1)[0]:
        return f"permission denied ({text})" if text else "permission denied"
    names = {c.__name__ for c in type(err).__mro__}
    if names & {"ClientConnectorError", "ServerDisconnectedError", "ConnectionError",
                "ConnectionRefusedError", "TimeoutError", "ServerTimeoutError",
                "EndpointConnectionError"}:
        return f"the storage server does not answer ({text})"
    return f"{type(err).__name__}: {text}"


def storage_error(err: BaseException, url: str, doing: str, *,
                  writing: bool = False) -> RunDirError:
    """One line for an error of the storage met while ``doing`` something to ``url``."""
    return RunDirError(f"cannot {doing} {one_line(url)}: "
                       f"{storage_reason(err, url, writing=writing)}")


def session_name(url: str) -> str:
    """The one XProf session name of every host of the run at ``url``: its last path component
    (the run's name), from the URL alone."""
    tail = normalise(url).rsplit("/", 1)[-1].split("://")[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", tail).strip("._") or "pod"
    return name


def host_dir_name(host: int) -> str:
    return HOST_DIR.format(host=host)


def remote_name(rel: str, host: int, session: str) -> str:
    """Where a file of host ``host``'s part (``rel``, relative to the part) goes under the
    run's URL: ``host<N>/rel``; a profile file of XProf goes to the run's one session
    (``tensorboard/plugins/profile/<session>/host<N>[-rank<R>].xplane.pb``)."""
    parts = rel.split("/")
    if TENSORBOARD_DIR in parts:
        i = parts.index(TENSORBOARD_DIR)
        below = "/".join(parts[i + 1:])
        if below.startswith(PROFILE_DIR + "/") and len(parts) == i + 5:
            suffix = next((s for s in PROFILE_SUFFIXES if parts[-1].endswith(s)), None)
            if suffix is not None:
                who = host_dir_name(host) + "".join(f"-{p}" for p in parts[:i])
                return f"{TENSORBOARD_DIR}/{PROFILE_DIR}/{session}/{who}{suffix}"
    return f"{host_dir_name(host)}/{rel}"


# --------------------------------------------------------------------------- host claims

#: a host's claim on its part: ``URL/host<N>/.claim-<token>.json``, written before the program
#: starts and removed when its trace ended (see :func:`claim_part`)
CLAIM_PREFIX = ".claim-"


def _is_claim(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(CLAIM_PREFIX) and base.endswith(".json")


def _listing(fs: Any, where: str) -> dict[str, dict[str, Any]]:
    """The objects under ``where`` (fresh: the filesystem's listing cache is dropped)."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache(where)
    try:
        found = fs.find(where, detail=True)
    except FileNotFoundError:
        return {}
    return {k: v for k, v in found.items() if v.get("type") != "directory"}


def _claim_order(name: str, info: dict[str, Any]) -> tuple[int, float, str]:
    """Claims in the order the bucket stored them: GCS's generation (it grows with each write),
    else the time it stored them; ties by name."""
    generation = info.get("generation")
    try:
        gen = int(generation) if generation is not None else 0
    except (TypeError, ValueError):
        gen = 0
    return gen, _stored_at(info) or 0.0, name


def _claim_data(fs: Any, name: str) -> dict[str, Any]:
    """What a claim says (pid, machine, how often its trace beats), {} when unreadable."""
    try:
        data = json.loads(fs.cat_file(name))
    except Exception:  # noqa: BLE001 - an unreadable claim says nothing
        return {}
    return data if isinstance(data, dict) else {}


def _holder(fs: Any, name: str) -> str:
    """Who a claim says holds the part (``pid 1234 on machine m``)."""
    data = _claim_data(fs, name)
    pid, machine = data.get("pid"), data.get("machine")
    return f"pid {pid} on {machine}" if pid and machine else "another trace"


def _live_claims(fs: Any, listing: dict[str, dict[str, Any]], part: str,
                 now: float) -> list[str]:
    """The claims of ``listing`` whose trace may still write the part, oldest first: the part's
    heartbeat is fresh, or (no fresh heartbeat) the claim is newer than the last heartbeat and
    younger than its trace's own staleness (a trace starting, before its first beat)."""
    claims = [n for n in listing if _is_claim(n)]
    if not claims:
        return []
    beat_name = f"{part}/{UPLOAD_FILE}"
    beat_info = listing.get(beat_name)
    beat_at = _stored_at(beat_info) if beat_info is not None else None
    if beat_info is not None:
        try:
            beat = json.loads(fs.cat_file(beat_name))
        except Exception:  # noqa: BLE001 - no usable heartbeat
            beat = None
        if isinstance(beat, dict):
            beat["stored_at"] = beat_at
            if heard_recently(beat, now) is not None:
                return sorted(claims, key=lambda n: _claim_order(n, listing[n]))
    live = []
    for name in claims:
        at = _stored_at(listing[name])
        every = _claim_data(fs, name).get("every")
        if not isinstance(every, (int, float)) or isinstance(every, bool) or every <= 0:
            every = beat_seconds(UPLOAD_SECONDS)
        if at is None or now - at > stale_after(float(every)):
            continue
        if beat_at is not None and beat_at > at:
            continue  # a heartbeat came after it: its trace uploaded, and stopped beating
        live.append(name)
    return sorted(live, key=lambda n: _claim_order(n, listing[n]))


def claim_part(url: str, host: int, *, force: bool, every: float) -> tuple[Any, str]:
    """Claim ``URL/host<N>/`` for this trace before the program starts; ``(filesystem, the
    claim object)``. Two writers of one host index never both write it: each writes a claim
    object, then lists the claims; the claim the bucket stored first among those still live
    (:func:`_live_claims`) wins, the other trace is refused (its claim removed); ``every``: how
    often this trace's heartbeat is written (in its claim: how long it stays live without
    one). A part that
    holds a run already is refused too, unless ``force`` (then it is replaced, once the claim
    is won), and so is a part another live trace writes, even with ``force``. Errors of the
    storage are one line (RunDirError, exit 3): a missing bucket, a server that does not answer.
    """
    import uuid

    fs, root = open_fs(url)
    part = f"{root}/{host_dir_name(host)}"
    shown = f"{normalise(url)}/{host_dir_name(host)}"
    env = "CLOUD_TPU_TASK_ID"
    try:
        listing = _listing(fs, part)
        live = _live_claims(fs, listing, part, time.time())
        if live:
            raise RunDirError(f"{shown} is being written by {_holder(fs, live[0])}: two traces "
                              f"with host index {host}; give each host its own ({env})")
        if any(not _is_claim(n) for n in listing) and not force:
            raise RunDirError(f"{shown} already holds this host's part of a run: use --force to "
                              "replace it, or another URL")
        mine = f"{part}/{CLAIM_PREFIX}{time.time_ns()}-{uuid.uuid4().hex[:12]}.json"
        fs.pipe_file(mine, json.dumps({"pid": os.getpid(), "machine": socket.gethostname(),
                                       "host": host, "every": every}).encode())
        listing = _listing(fs, part)
        live = _live_claims(fs, listing, part, time.time())
        if mine not in listing:
            live = [*live, mine]
        if live and live[0] != mine:
            with contextlib.suppress(Exception):
                fs.rm(mine)
            raise RunDirError(f"{shown} is being written by {_holder(fs, live[0])}, which "
                              f"started at the same time: two traces with host index {host}; "
                              f"give each host its own ({env})")
        old = [n for n in listing if n != mine and n not in live]
        if old:  # the old run (force), and claims of traces long gone
            fs.rm(old)
    except RunDirError:
        raise
    except Exception as err:  # noqa: BLE001 - the storage's own errors, one line
        raise storage_error(err, url, "write", writing=True) from None
    return fs, mine


def probe_bucket(url: str) -> None:
    """Write and remove a small object under ``url``: a bucket that does not exist or cannot
    be written is one line (RunDirError) before the program starts, when the host is not known
    yet (its claim comes later)."""
    import uuid

    fs, root = open_fs(url)
    probe = f"{root}/.lazyscope-probe-{uuid.uuid4().hex[:12]}"
    try:
        fs.pipe_file(probe, b"lazyscope")
        fs.rm(probe)
    except Exception as err:  # noqa: BLE001 - the storage's own errors, one line
        raise storage_error(err, url, "write", writing=True) from None


def release_claim(fs: Any, claim: str) -> None:
    """Remove a claim (its trace ended); never raises: a claim left behind goes stale."""
    with contextlib.suppress(Exception):
        fs.rm(claim)


# --------------------------------------------------------------------------- the spool


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lazyscope"


def spool_root() -> Path:
    return Path(os.environ.get("LAZYSCOPE_SPOOL") or cache_root() / "spool")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def spool_error(err: OSError, path: Path, url: str) -> OutputError:
    """One line for a spool directory that cannot be written: it names the spool (and how to
    put it elsewhere), not a bare "No space left on device"."""
    what = "no space left" if err.errno in (errno.ENOSPC, errno.EDQUOT) else os_reason(err)
    return OutputError(f"cannot write the local spool of {normalise(url)} ({show_path(path)}): "
                       f"{what}; set LAZYSCOPE_SPOOL to a directory with room")


class Spool:
    """The local directory a host's part is written to before it reaches the bucket."""

    def __init__(self, path: Path, url: str, host: int | None):
        self.path = path
        self.url = normalise(url)
        self.host = host

    @property
    def part(self) -> Path:
        return self.path / PART_DIR

    @classmethod
    def create(cls, url: str, host: int | None) -> Spool:
        key = hashlib.sha1(normalise(url).encode()).hexdigest()[:12]
        root = spool_root()
        path = root / f"{key}-{host if host is not None else 'x'}-{os.getpid()}-{time.time_ns()}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            path.mkdir()
            spool = cls(path, url, host)
            spool.record("writing")
        except OSError as err:
            shutil.rmtree(path, ignore_errors=True)
            raise spool_error(err, path, url) from None
        return spool

    def record(self, state: str, **extra: Any) -> None:
        data = {"url": self.url, "host": self.host, "pid": os.getpid(), "state": state,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra}
        tmp = self.path / (SPOOL_FILE + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path / SPOOL_FILE)

    @staticmethod
    def read(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads((path / SPOOL_FILE).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def drop_uploaded_spool(part: Path) -> None:
    """Remove the spool holding ``part`` when its part reached the bucket (a trace that failed
    or was stopped, its report shown from the spool); anything else is left alone."""
    info = Spool.read(part.parent)
    if part.name == PART_DIR and info is not None and info.get("state") == "uploaded":
        shutil.rmtree(part.parent, ignore_errors=True)


def _read_order(path: Path) -> tuple[int, str]:
    """The order one upload reads a part's files in, so that what it reads is one state of the
    run while the trace goes on appending: ``meta.json`` first (a run it says ended has every
    record already), the records next, ``intern.jsonl`` last (append-only: read after the
    records that refer to it, it holds every entry they name)."""
    name = path.name
    return (0 if name == META_FILE else 2 if name == INTERN_FILE else 1, path.as_posix())


def _crc(path: Path) -> tuple[int, bytes]:
    data = path.read_bytes()
    return zlib.crc32(data), data


class Uploader:
    """Copies a spool's part to ``URL/host<N>/`` in the background and at the end.

    One daemon thread, every ``interval`` seconds: the files that changed since the last
    upload (record files by checksum: they are rewritten in place), nothing else, so a tick is
    bounded by what the steps since the last one wrote. The traced program never waits for it.
    ``host``: called for the host index when it is not known yet (None: not yet; the part is
    uploaded once it is). ``hosts``: how many hosts the pod has and where that was read (the
    launcher's), written into every heartbeat."""

    def __init__(self, spool: Spool, *, host: Callable[[], int | None] | None = None,
                 interval: float | None = None, claim: str | None = None, force: bool = False,
                 hosts: tuple[int, str] | None = None):
        self.spool = spool
        self.hosts = hosts
        self.interval = upload_seconds() if interval is None else interval
        self._host = host
        #: this trace's claim on its part (:func:`claim_part`), removed after the last upload;
        #: None until the host is known (then claimed)
        self.claim = claim
        self._force = force
        #: why the part may not be uploaded (another trace holds the host's part)
        self.refused: str | None = None
        self._sent: dict[str, Any] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._fs: tuple[Any, str] | None = None
        #: the last upload's error (the next tick tries again)
        self.error: str | None = None
        self.uploads = 0
        self.beat_every = beat_seconds(self.interval)
        self._beat_at = -1e18
        #: the manifest's entries: each record file uploaded, its size and CRC-32
        self._listed: dict[str, dict[str, int]] = {}
        self._manifest_written = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lazyscope-upload", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self.sync()

    def host(self) -> int | None:
        if self.spool.host is None and self._host is not None:
            with contextlib.suppress(Exception):
                found = self._host()
                if found is not None:
                    self.spool.host = found
                    self.spool.record("writing")
        if self.spool.host is not None and self.claim is None and self._host is not None \
                and self.refused is None:
            # the host became known while the program ran: its part is claimed now
            try:
                self._fs = None
                fs, self.claim = claim_part(self.spool.url, self.spool.host, force=self._force,
                                            every=self.beat_every)
            except RunDirError as err:
                self.refused = str(err)
        return self.spool.host

    def sync(self, *, final: bool = False) -> int:
        """Upload what changed; the number of files uploaded. Raises what the filesystem
        raised (kept in :attr:`error` too).

        One upload is a consistent snapshot for a reader: every record file is read before any
        is sent, in the order that makes what is read one state of the run
        (:func:`_read_order`); each goes up as the bytes its checksum was taken of, and then the
        part's manifest (:data:`MANIFEST_FILE`: each record file's size and CRC-32), written
        last; a reader takes a part only when its files match its manifest
        (:func:`download`)."""
        with self._lock:
            host = self.host()
            if host is None:
                if not final:
                    return 0
                host = self.spool.host = 0
            if self.refused is not None:
                self.error = self.refused
                raise RunDirError(self.refused)
            try:
                if self._fs is None:
                    self._fs = open_fs(self.spool.url)
                fs, root = self._fs
                session = session_name(self.spool.url)
                n = 0
                self._beat(fs, root, host)
                # the snapshot first, every file read before any is sent (an upload takes
                # longer than the trace takes to append), in the order that makes it whole
                snapshot: list[tuple[Path, str, Any, bytes | None]] = []
                for path in sorted(self.spool.part.rglob("*"), key=_read_order):
                    if not path.is_file() or path.name in LOCAL_ONLY or path.suffix == ".tmp":
                        continue
                    rel = path.relative_to(self.spool.part).as_posix()
                    data: bytes | None = None
                    try:
                        if path.name in CHECKED:
                            key, data = _crc(path)
                        else:
                            st = path.stat()
                            key = (st.st_size, st.st_mtime_ns)
                    except OSError:
                        continue  # replaced while we looked: the next tick takes it
                    snapshot.append((path, rel, key, data))
                present = {rel for _, rel, _, _ in snapshot}
                for path, rel, key, data in snapshot:
                    if self._sent.get(rel) == key:
                        continue
                    target = f"{root}/{remote_name(rel, host, session)}"
                    self._beat(fs, root, host)  # between the files of a long upload too
                    if data is None:
                        fs.put_file(str(path), target)
                    else:
                        fs.pipe_file(target, data)
                        self._listed[rel] = {"size": len(data), "crc32": key}
                    self._sent[rel] = key
                    n += 1
                for gone in set(self._listed) - present:
                    del self._listed[gone]
                if n or final or not self._manifest_written:
                    self._write_manifest(fs, root, host)
                if final:
                    self._beat(fs, root, host, ended=True)
                    if self.claim is not None:
                        release_claim(fs, self.claim)
                self.uploads += 1
                self.error = None
                return n
            except Exception as err:
                self.error = storage_reason(err, self.spool.url, writing=True)
                raise

    def _write_manifest(self, fs: Any, root: str, host: int) -> None:
        """The part's manifest, beside its heartbeat: the record files uploaded so far below
        the heartbeat's directory, relative to it, each with its size and CRC-32."""
        where = self._beat_dir()
        files = {rel[len(where):]: entry for rel, entry in sorted(self._listed.items())
                 if rel.startswith(where)}
        fs.pipe_file(f"{root}/{host_dir_name(host)}/{where}{MANIFEST_FILE}",
                     json.dumps({"files": files}).encode())
        self._manifest_written = True

    def _beat(self, fs: Any, root: str, host: int, *, ended: bool = False) -> None:
        """Rewrite the part's heartbeat (``upload.json``) when the last one is
        :attr:`beat_every` old (or, ``ended``, to say no more uploads follow)."""
        now = time.monotonic()
        if not ended and now - self._beat_at < self.beat_every:
            return
        beat = {"state": "ended" if ended else "writing", "host": host, "pid": os.getpid(),
                "machine": socket.gethostname(), "every": self.beat_every,
                "manifest": MANIFEST_FILE}
        if self.hosts is not None:
            beat.update(hosts=self.hosts[0], hosts_from=self.hosts[1])
        fs.pipe_file(f"{root}/{host_dir_name(host)}/{self._beat_dir()}{UPLOAD_FILE}",
                     json.dumps(beat).encode())
        self._beat_at = now

    def _beat_dir(self) -> str:
        """Where in the host's part the heartbeat goes: beside what this uploader uploads, the
        part itself, or (``rank<R>/``) the one rank's run it holds when this process is one
        rank of a launcher's several, each uploading and beating on its own."""
        part = self.spool.part
        try:
            ranks = [p.name for p in part.iterdir() if rank_of(p) is not None and p.is_dir()]
        except OSError:
            return ""
        return f"{ranks[0]}/" if len(ranks) == 1 and not (part / META_FILE).exists() else ""

    def abandon(self) -> None:
        """The trace never started (refused, or stopped while starting): its claim goes, and
        its spool, which holds nothing recorded."""
        if self.claim is not None:
            with contextlib.suppress(Exception):
                release_claim(open_fs(self.spool.url)[0], self.claim)
            self.claim = None
        self.spool.remove()

    def finish(self) -> str | None:
        """Stop the thread, upload the rest; None when the part reached the bucket, else why
        not (the spool is kept: the next lazyscope command on this host uploads it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            self.sync(final=True)
        except Exception:  # noqa: BLE001 - said, the spool is kept
            self.spool.record("writing", error=self.error)
            return self.error
        self.spool.record("uploaded")
        return None


LazyscopeErrors = (MissingDependencyError, UsageError)


def recover_spools(say: Callable[[str], None]) -> None:
    """Upload the parts that traces on this host left in their spools (killed before their
    last upload); remove the spools that reached the bucket. Said, one line each."""
    root = spool_root()
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for path in entries:
        if not path.is_dir():
            continue
        info = Spool.read(path)
        if info is None:
            # no record at all: a spool being created this instant, or debris; old debris goes
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime > 3600:
                    shutil.rmtree(path, ignore_errors=True)
            continue
        if info.get("state") == "uploaded":
            shutil.rmtree(path, ignore_errors=True)
            continue
        pid = info.get("pid")
        if isinstance(pid, int) and _alive(pid):
            continue  # a live trace uploads its own part
        url = str(info.get("url", ""))
        host = info.get("host") if isinstance(info.get("host"), int) else 0
        where = f"{url}/{host_dir_name(host)}"
        spool = Spool(path, url, host)
        if not spool.part.is_dir() or not any(spool.part.iterdir()):
            shutil.rmtree(path, ignore_errors=True)  # a trace that never started: nothing lost
            continue
        uploader = Uploader(spool, interval=UPLOAD_SECONDS)
        try:
            n = uploader.sync(final=True)
        except LazyscopeErrors as err:
            say(f"could not upload the part of {where} left by pid {pid}: {err}; it is kept in "
                f"{path}")
            continue
        except Exception:  # noqa: BLE001 - said
            say(f"could not upload the part of {where} left by pid {pid} ({uploader.error}); "
                f"it is kept in {path}")
            continue
        say(f"uploaded what pid {pid} left of {where} ({n} file{'s' if n != 1 else ''}: its "
            "trace ended before its last upload)")
        spool.remove()


# --------------------------------------------------------------------------- reading


def download_dir(url: str) -> Path:
    key = hashlib.sha1(normalise(url).encode()).hexdigest()[:16]
    return cache_root() / "download" / f"{session_name(url)}-{key}"


def _tag(info: dict[str, Any]) -> str:
    for key in ("generation", "etag", "ETag", "md5Hash"):
        if info.get(key):
            return f"{key}:{info[key]}"
    return f"size:{info.get('size')}:{info.get('mtime') or info.get('LastModified')}"


#: how often :func:`download` lists again when a part's files do not match its manifest (an
#: upload in progress), and the seconds between two tries
SETTLE_TRIES = 12
SETTLE_SECONDS = 0.25


def _download_listing(fs: Any, root: str, url: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """``{rel: (object name, tag, its listing)}`` of the objects under ``root``."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache()
    try:
        listing = fs.find(root, detail=True)
    except FileNotFoundError:
        listing = {}
    except Exception as err:  # noqa: BLE001 - the filesystem's own errors, said in one line
        raise storage_error(err, url, "list") from None
    # the hosts' claims are the writers' business, not the run's
    listing = {k: v for k, v in listing.items() if not _is_claim(k)}
    out: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for name, info in listing.items():
        if info.get("type") == "directory":
            continue
        rel = name[len(root):].lstrip("/")
        if not rel or rel.startswith("..") or "/../" in f"/{rel}/":
            continue
        out[rel] = (name, _tag(info), info)
    return out


def _groups(names: set[str]) -> dict[str, str | None]:
    """``{directory: its manifest or None}`` of every uploader's part under a download: a
    directory holding a manifest or a heartbeat (``host1/``, ``host1/rank0/``, or ``""`` for a
    URL that is one host's part)."""
    out: dict[str, str | None] = {}
    for rel in names:
        where, _, name = rel.rpartition("/")
        prefix = f"{where}/" if where else ""
        if name == MANIFEST_FILE:
            out[prefix] = rel
        elif name == UPLOAD_FILE:
            out.setdefault(prefix, None)
    return out


def _matches(manifest: Path, prefix: str, read: Callable[[str], Path]) -> bool:
    """True when the files of one upload's manifest (at ``manifest``) are, byte for byte, those
    ``read(rel)`` gives (the freshly fetched copy, else the one already here)."""
    try:
        files = json.loads(manifest.read_bytes()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return False
    for rel, entry in files.items():
        try:
            data = read(prefix + rel).read_bytes()
        except OSError:
            return False
        if len(data) != entry.get("size") or zlib.crc32(data) != entry.get("crc32"):
            return False
    return True


def download(url: str, stats: dict[str, int] | None = None, *,
             tries: int = SETTLE_TRIES) -> Path:
    """A local copy of the run at ``url`` (see the module docstring): the objects that
    changed since the last download, fetched in parallel batches. ``stats`` gets how many
    objects the URL holds (``objects``) and how many were fetched (``fetched``).

    The copy is consistent: each uploader's part (a directory with its heartbeat) is taken
    only when its files match its manifest, i.e. all from one upload. Objects fetched in the
    middle of an upload (the manifest of one, a record file of the next) are fetched again,
    up to ``tries`` listings :data:`SETTLE_SECONDS` apart; a part that never matches keeps its
    previous copy here (none the first time: not there yet). A part whose heartbeat promises a
    manifest not uploaded yet (its first upload in progress) is not there yet either. Parts
    uploaded without a manifest (an older lazyscope) are taken as they are."""
    fs, root = open_fs(url)
    dest = download_dir(url)
    staging = dest.with_name(f"{dest.name}.incoming-{os.getpid()}")
    try:
        index: dict[str, str] = json.loads((dest / INDEX_FILE).read_text())
    except (OSError, ValueError):
        index = {}
    fetched: dict[str, str] = {}  # rel -> tag of what staging holds
    objects = n_fetched = 0
    listing: dict[str, tuple[str, str, dict[str, Any]]] = {}
    held: set[str] = set()
    for attempt in range(max(1, tries)):
        if attempt:
            time.sleep(SETTLE_SECONDS)
        listing = _download_listing(fs, root, url)
        if not listing:
            raise RunDirError(f"{url} holds nothing: no lazyscope run there")
        have = {**index, **fetched}
        todo = [(rel, name) for rel, (name, tag, _) in listing.items()
                if have.get(rel) != tag or not ((staging / rel).is_file()
                                                or (dest / rel).is_file())]
        objects = len(listing)
        n_fetched += len(todo)
        for start in range(0, len(todo), DOWNLOAD_BATCH):
            batch = todo[start:start + DOWNLOAD_BATCH]
            try:
                got = fs.cat([name for _, name in batch], on_error="return")
            except Exception as err:  # noqa: BLE001 - the filesystem's own errors, one line
                raise storage_error(err, url, "download") from None
            for rel, name in batch:
                data = got.get(name) if isinstance(got, dict) else None
                if not isinstance(data, bytes):
                    continue  # gone since the listing (a replaced file): the next listing
                out = staging / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                if out.name == UPLOAD_FILE:
                    data = _stamped(data, listing[rel][2])
                out.write_bytes(data)
                fetched[rel] = listing[rel][1]

        def read(rel: str) -> Path:
            return staging / rel if rel in fetched else dest / rel

        held = {prefix for prefix, manifest in _groups(set(listing)).items()
                if manifest is None and _promises_manifest(read(prefix + UPLOAD_FILE))
                or manifest is not None and not _matches(read(manifest), prefix, read)}
        if not held:
            break
    if stats is not None:
        stats.update(objects=objects, fetched=n_fetched)

    def is_held(rel: str) -> bool:
        return any(rel.startswith(prefix) and rel != prefix + UPLOAD_FILE for prefix in held)

    dest.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, str] = {}
    for rel in listing:
        if is_held(rel):
            if rel in index and (dest / rel).is_file():
                wanted[rel] = index[rel]  # the copy of the last consistent upload stays
            continue
        if rel in fetched:
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, out)
            wanted[rel] = fetched[rel]
        elif rel in index and (dest / rel).is_file():
            wanted[rel] = index[rel]
    for rel in set(index) - set(listing):
        with contextlib.suppress(OSError):
            (dest / rel).unlink()
    shutil.rmtree(staging, ignore_errors=True)
    (dest / INDEX_FILE).write_text(json.dumps(wanted))
    return dest


def _promises_manifest(beat: Path) -> bool:
    """True when a heartbeat says its uploader writes a manifest (and so a part without one
    is a first upload still in progress)."""
    try:
        data = json.loads(beat.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("manifest") == MANIFEST_FILE


def _stored_at(info: dict[str, Any]) -> float | None:
    """When the bucket stored an object (the server's time, seconds since the epoch) from its
    listing: gcsfs ``mtime``/``updated``, s3fs ``LastModified``, a local file's ``mtime``."""
    import datetime as dt

    for key in ("mtime", "updated", "LastModified", "last_modified"):
        value = info.get(key)
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)
            return value.timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def _stamped(data: bytes, info: dict[str, Any]) -> bytes:
    """A heartbeat's downloaded copy, with when the bucket stored it (``stored_at``)."""
    try:
        beat = json.loads(data)
    except ValueError:
        return data
    if not isinstance(beat, dict):
        return data
    beat["stored_at"] = _stored_at(info)
    return json.dumps(beat).encode()


def heard_recently(beat: dict[str, Any], now: float) -> str | None:
    """Who still uploads a host's part (``pid 1234 (machine), its last upload 2 s ago``), from
    its downloaded heartbeat, or None: it said it ended, or its last beat is older than
    :func:`stale_after` its period (its trace is gone: killed, or its machine), or the
    heartbeat says nothing usable. Pure."""
    stored, every = beat.get("stored_at"), beat.get("every")
    if beat.get("state") != "writing" or not isinstance(stored, (int, float)) \
            or not isinstance(every, (int, float)) or isinstance(every, bool) or every <= 0:
        return None
    age = max(0.0, now - float(stored))  # a reader's clock behind the bucket's: just now
    if age > stale_after(float(every)):
        return None
    pid, machine = beat.get("pid"), beat.get("machine")
    who = f"pid {pid}" if isinstance(pid, int) else "a trace"
    if isinstance(machine, str) and machine:
        who += f" ({machine})"
    return f"{who}, its last upload {age:.0f} s ago"


def heard_from(part: Path) -> str | None:
    """:func:`heard_recently` of the heartbeat downloaded with a host's part (``part``: the
    part, or one rank's run in it: its own heartbeat, else the part's), None where there is
    none (a run that is no download)."""
    for where in (part, part.parent):
        try:
            beat = json.loads((where / UPLOAD_FILE).read_text())
        except (OSError, ValueError):
            continue
        return heard_recently(beat, time.time()) if isinstance(beat, dict) else None
    return None
