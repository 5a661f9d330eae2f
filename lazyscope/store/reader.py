"""Reading a run directory back (schemas 3 and 2, and schema 1 through
:mod:`lazyscope.store.schema1`; a schema-2 run's step records lack the time intervals, which read
as not measured):
every finished record of a run killed mid-way; a half-written last record or line is dropped
with a warning; anything else unreadable is a :class:`~lazyscope.core.errors.RunDirError` (exit 3).

What loads is checked for range, never shown as data when it cannot be true, with one warning
per file naming it (``Run.warnings``, printed by every report):

* a step value that is not a number, a negative duration, a count that is negative, not whole
  or beyond 2**53 (a damaged record) counts as 0;
* an event at a step outside the run, or with a negative or non-finite count, is dropped;
* a record file of a schema-2 run that is missing, and a step file that holds no step while the
  backend's own counters say the program ran, are said;
* a record file that is not a regular file (a FIFO would block every command) is corruption;
  so is ``schema_version`` that is not a known version number (``true``, ``"2"``, ``0``);
  a file that cannot be read is "cannot read", never "corrupt".
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from lazyscope.core.errors import RunDirError, cannot_read, show_path
from lazyscope.core.units import counted
from lazyscope.model import (
    EVENT_KINDS,
    PAYLOADS,
    SCHEMA_VERSION,
    STEP_FIELDS,
    EventTable,
    Frame,
    Meta,
    PodRun,
    RankedRun,
    Run,
    Stack,
    StepTable,
)
from lazyscope.model.codec import decode
from lazyscope.model.steps import INTERVAL_FIELDS
from lazyscope.store.layout import (
    ANNOTATIONS_FILE,
    EVENTS_FILE,
    INTERN_FILE,
    META_FILE,
    STEPS_FILE,
    UPLOAD_FILE,
)
from lazyscope.store.lock import short_holder, writer_of
from lazyscope.store.records import (
    EVENT_DTYPE,
    KIND_STEP,
    KIND_TAIL,
    lost_steps,
    step_dtype,
)
from lazyscope.store.remote import heard_from
from lazyscope.store.rundir import host_dirs, is_run_dir, rank_dirs
from lazyscope.store.schema1 import load_v1


def _open_regular(path: Path) -> Any:
    """``path`` opened for reading (unbuffered), or None when it does not exist; a FIFO, a
    device or a directory is refused without blocking on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise cannot_read(err, path) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunDirError(f"{show_path(path)} is not a regular file: the run file is "
                              "corrupt")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb", buffering=0)  # noqa: SIM115


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory; a path that cannot even be looked at (a name too
    long, no permission) is a RunDirError saying so."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as err:
        raise cannot_read(err, path) from None


def _read_bytes(path: Path) -> bytes | None:
    fh = _open_regular(path)
    if fh is None:
        return None
    with fh:
        try:
            return fh.readall()
        except OSError as err:
            raise RunDirError(f"cannot read {show_path(path)}: {err.strerror}") from None


#: records read per chunk: about half a megabyte, so a chunk is still in cache when its fields
#: are copied out
_CHUNK_RECORDS = 4096


def _records(path: Path, dtype: np.dtype, warnings: list[str],
             first: str) -> dict[str, np.ndarray]:
    """The records of a binary file as columns (one contiguous array per field): zero padding
    at the end ignored, a partial last record dropped with a warning, a zero record in the
    middle is corruption.

    The file is read in chunks into one reused buffer and each chunk's fields copied out to
    their columns: a million-step file is never held as one bytes object and then copied
    field by field out of it (three times slower here, most of it page faults)."""
    names = [n for n in dtype.names if not n.startswith("_")]
    size = dtype.itemsize
    fh = _open_regular(path)
    if fh is None:
        warnings.append(f"{path.name} is missing: what it recorded is lost")
        return {n: np.zeros(0, dtype=dtype[n].newbyteorder("=")) for n in names}
    with fh:
        try:
            whole = os.fstat(fh.fileno()).st_size // size
            cols = {n: np.empty(whole, dtype=dtype[n].newbyteorder("=")) for n in names}
            buf = np.empty(min(_CHUNK_RECORDS, max(whole, 1)), dtype=dtype)
            view = memoryview(buf).cast("B")
            pos = 0
            while pos < whole:
                want = min(len(buf), whole - pos)
                got = 0
                while got < want * size:  # a short read is not the end unless it reads 0
                    k = fh.readinto(view[got:want * size])
                    if not k:
                        break
                    got += k
                got //= size
                chunk = buf[:got]
                for n in names:
                    cols[n][pos:pos + got] = chunk[n]
                pos += got
                if got < want:  # the file was cut while read (a run being closed)
                    break
            after = fh.read(1) if pos == whole else b""
        except OSError as err:
            raise cannot_read(err, path) from None
    valid = cols[first][:pos] != 0
    n = int(np.count_nonzero(valid))
    if n and not valid[:n].all():
        raise RunDirError(f"{show_path(path)} has an empty record in the middle: the run file is corrupt")
    # what follows the whole records is zero padding (a run still being written, or killed),
    # unless it starts with a record's non-zero tag byte: a cut record
    if n == pos and after not in (b"", b"\x00"):
        warnings.append(f"{path.name}: the last record was cut off mid-write (the run was "
                        "killed); it was skipped")
    return {name: col[:n] for name, col in cols.items()}


def _lines(path: Path, warnings: list[str]) -> list[bytes]:
    """Complete lines of a text file (zero padding ignored; a cut last line is a warning)."""
    raw = _read_bytes(path)
    if not raw:
        return []
    raw = raw.rstrip(b"\x00")
    if not raw:
        return []
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    elif lines:
        warnings.append(f"{path.name}: its last line was cut off mid-write (the run was "
                        "killed); it was skipped")
        lines.pop()
    return lines


def _decode_frame(obj: Any) -> Frame:
    f = obj["f"]
    return Frame(str(f[0]), int(f[1]), str(f[2]), bool(f[3]) if len(f) > 3 else False)


class _InternTable:
    """The intern file, decoded lazily: each line once, when first used."""

    def __init__(self, path: Path, lines: list[bytes]):
        self.path = path
        self.lines = lines
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def get(self, i: int) -> Any:
        try:
            return self._cache[i]
        except KeyError:
            pass
        try:
            value = json.loads(self.lines[i - 1].decode("utf-8"))
            if isinstance(value, dict) and "f" in value:
                value = _decode_frame(value)
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, IndexError):
            raise RunDirError(f"{self.path} line {i} is not a valid entry: the run file is "
                              "corrupt") from None
        self._cache[i] = value
        return value

    def stack(self, ref: int) -> Stack:
        obj = self.get(ref)
        try:
            frames = tuple(self.get(int(i)) for i in obj["s"])
        except (TypeError, KeyError, ValueError):
            raise RunDirError(f"{self.path} line {ref} is not a stack: the run file is "
                              "corrupt") from None
        if not all(isinstance(f, Frame) for f in frames):
            raise RunDirError(f"{self.path} line {ref}: a stack refers to a non-frame entry: "
                              "the run file is corrupt")
        return frames

    def payload(self, ref: int, kind_of: dict[int, str]) -> Any:
        obj = self.get(ref)
        kind = kind_of.get(ref)
        try:
            return PAYLOADS[kind].from_json(obj["p"]) if kind else obj["p"]
        except (TypeError, KeyError, ValueError, AttributeError):
            raise RunDirError(f"{self.path} line {ref} is not a valid {kind} payload: the run "
                              "file is corrupt") from None

    def string(self, ref: int) -> str:
        value = self.get(ref)
        if not isinstance(value, str):
            raise RunDirError(f"{self.path} line {ref} is not a string: the run file is corrupt")
        return value


def read_meta(path: Path) -> tuple[Meta, int]:
    """The metadata of the run at ``path`` and the schema it was written with."""
    meta_path = path / META_FILE
    shown = show_path(meta_path)
    try:
        is_file = meta_path.is_file()
    except OSError as err:
        raise cannot_read(err, meta_path) from None
    if not is_file:
        if meta_path.exists() or meta_path.is_symlink():
            raise RunDirError(f"{shown} is not a file: the run file is corrupt")
        raise RunDirError(f"{show_path(path)} is not a lazyscope run: it has no {META_FILE}")
    raw = _read_bytes(meta_path) or b""
    try:
        meta_raw = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RunDirError(f"{shown} is not valid JSON: the run file is corrupt") from None
    if not isinstance(meta_raw, dict):
        raise RunDirError(f"{shown} holds a JSON {type(meta_raw).__name__.replace('dict', 'object')}"
                          ", not an object: the run file is corrupt")
    version = meta_raw.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunDirError(f"{shown}: schema_version is {version!r} (a "
                          f"{type(version).__name__}), not a schema number: the run file is "
                          "corrupt")
    if version < 1:
        raise RunDirError(f"{shown}: schema_version {version} is not a lazyscope run schema: "
                          "the run file is corrupt")
    if version > SCHEMA_VERSION:
        raise RunDirError(
            f"{show_path(path)} was written with run schema {version}, newer than this "
            f"lazyscope understands ({SCHEMA_VERSION}); upgrade lazyscope to read it")
    if version < 2:
        meta_raw.pop("capabilities", None)
        if meta_raw.get("warmup_steps") == 2:  # schema 1 always wrote its fixed warm-up
            meta_raw["warmup_steps"] = None
    try:
        meta = decode(Meta, meta_raw)
    except ValueError as err:
        raise RunDirError(f"{shown} has unexpected content: {err}") from None
    return meta, version


#: step fields that count things: whole numbers in [0, 2**53)
COUNT_FIELDS = frozenset(f for f in STEP_FIELDS if f.endswith(("_count", "_bytes")))
MAX_COUNT = float(1 << 53)


def _check_steps(columns: dict[str, np.ndarray], measured: list[str],
                 warnings: list[str]) -> None:
    """Values no step can have (see the module docstring) count as 0, with one warning."""
    bad_nan = bad_range = 0
    example = ""
    for f in measured:
        col = columns[f]
        finite = np.isfinite(col)
        if f in COUNT_FIELDS:
            ok = finite & (col >= 0) & (col < MAX_COUNT) & (np.floor(col) == col)
        else:
            ok = finite & (col >= 0)
        if not ok.all():
            nan = int((~finite).sum())
            bad_nan += nan
            bad_range += int((~ok).sum()) - nan
            if not example and (finite & ~ok).any():
                i = int(np.flatnonzero(finite & ~ok)[0])
                example = f" (step {i}: {f} {float(col[i])!r})"
            columns[f] = np.where(ok, col, 0.0)
    if bad_nan:
        warnings.append(f"{STEPS_FILE}: {counted(bad_nan, 'measured value')} "
                        f"{'was not a number' if bad_nan == 1 else 'were not numbers'} (the file "
                        "is damaged); they count as 0")
    if bad_range:
        warnings.append(f"{STEPS_FILE}: {counted(bad_range, 'value')} no step can have{example}, "
                        "such as a negative time or count (the file is damaged); they count as 0")


def _runtime_count_warnings(meta: Meta) -> list[str]:
    """The backend's own counters in ``meta.json`` that are no count (negative, not a number)
    are dropped, with a warning: they are never shown as data."""
    bad = meta.run_info.damaged_counts
    if not bad:
        return []
    shown = ", ".join(f"{k} {v!r}" for k, v in list(bad.items())[:3])
    return [f"{META_FILE}: runtime counts that are no count ({shown}): the file is damaged; "
            "dropped"]


def load_run(path: str | os.PathLike[str]) -> Run:
    """Load the run at ``path``; see the module docstring for what is tolerated."""
    path = Path(path)
    if not _is_dir(path):
        raise RunDirError(f"{show_path(path)} is not a directory (expected a lazyscope run directory)")
    meta, version = read_meta(path)
    if version < 2:
        run = load_v1(path, meta)
        run.warnings.extend(_runtime_count_warnings(meta))
        return run
    warnings: list[str] = _runtime_count_warnings(meta)
    steps_cols = _records(path / STEPS_FILE, step_dtype(version), warnings, "kind")
    if version < 3:  # a schema-2 run has no time intervals: not measured there
        for name in INTERVAL_FIELDS:
            steps_cols[name] = np.full(len(steps_cols["kind"]), np.nan)
        caps = meta.capabilities
        caps.step_fields = [f for f in caps.step_fields if f not in INTERVAL_FIELDS]
    cols = _records(path / EVENTS_FILE, EVENT_DTYPE, warnings, "kind")
    intern = _InternTable(path / INTERN_FILE, _lines(path / INTERN_FILE, warnings))
    annotations = _annotations(path / ANNOTATIONS_FILE, warnings)

    kinds = steps_cols["kind"]
    if len(kinds) and not np.isin(kinds, (KIND_STEP, KIND_TAIL)).all():
        raise RunDirError(f"{path / STEPS_FILE} has a record of unknown kind: the run file is "
                          "corrupt")
    tails = np.flatnonzero(kinds == KIND_TAIL)
    if len(tails) == 0 or (len(tails) == 1 and tails[0] == len(kinds) - 1):
        # the usual shapes (no tail, or one at the end): views, no copy
        n = int(tails[0]) if len(tails) else len(kinds)
        columns = {f: steps_cols[f][:n] for f in STEP_FIELDS}
        tail_rows = {f: steps_cols[f][n:] for f in STEP_FIELDS}
    else:
        is_step = kinds == KIND_STEP
        columns = {f: steps_cols[f][is_step] for f in STEP_FIELDS}
        tail_rows = {f: steps_cols[f][~is_step] for f in STEP_FIELDS}
    columns = dict(columns)
    _check_steps(columns, meta.capabilities.step_fields, warnings)
    tail_cols = {f: tail_rows[f][-1:].copy() for f in STEP_FIELDS}
    if len(tail_rows["wall_s"]):
        _check_steps(tail_cols, meta.capabilities.step_fields, warnings)
    tail = ({f: float(tail_cols[f][-1]) for f in STEP_FIELDS} if len(tail_rows["wall_s"])
            else None)
    if not len(columns["wall_s"]) and tail is None:
        lost_steps(meta, STEPS_FILE, warnings)
    steps = StepTable(columns, meta.capabilities.step_fields, tail, annotations)

    codes = cols["kind"]
    if len(codes) and int(codes.max()) > len(EVENT_KINDS):
        unknown = sorted({int(c) for c in codes if int(c) > len(EVENT_KINDS)})
        raise RunDirError(
            f"{show_path(path / EVENTS_FILE)} has "
            f"{counted(int((codes > len(EVENT_KINDS)).sum()), 'record')} "
            f"of no known kind (kind {unknown[0]}"
            f"{', ...' if len(unknown) > 1 else ''}): the run file is corrupt")
    cols = _check_events(cols, len(columns["wall_s"]), warnings)
    codes = cols["kind"]
    refs = [cols[c] for c in ("stack", "payload", "key")]
    if len(codes) and max(int(r.max()) for r in refs) > len(intern):
        missing = max(int(r.max()) for r in refs)
        if missing == len(intern) + 1 and warnings:
            # the intern line was cut by a kill: drop the events that need it
            keep = np.all([r <= len(intern) for r in refs], axis=0)
            cols = {c: col[keep] for c, col in cols.items()}
        else:
            raise RunDirError(f"{path / EVENTS_FILE} refers to entry {missing} of "
                              f"{INTERN_FILE}, which has {len(intern)}: the run file is corrupt")
    # the kind of each payload id, by scatter (ids are intern line numbers: a small range),
    # not a sort of the events
    code_of = np.zeros(len(intern) + 1, dtype=np.uint8)
    code_of[cols["payload"]] = cols["kind"]
    kind_of = {int(pid): EVENT_KINDS[int(code_of[pid]) - 1]
               for pid in np.flatnonzero(code_of) if pid}
    written_by = None
    if meta.status == "running":  # who writes it: a lock here, or a host's heartbeat (a URL)
        writer = writer_of(path)
        written_by = short_holder(writer) if writer is not None else heard_from(path)
    events = EventTable(cols, _LazyRef(intern.stack),
                        _LazyRef(lambda i: intern.payload(i, kind_of)), _LazyRef(intern.string))
    return Run(path=path, meta=meta, steps=steps, events=events, warnings=warnings,
               written_by=written_by)


def _check_events(cols: dict[str, np.ndarray], n_steps: int,
                  warnings: list[str]) -> dict[str, np.ndarray]:
    """Events at a step outside the run (0 .. n_steps, the tail being n_steps), or with a
    count that is negative or not a number, are dropped with one warning; a negative or
    non-finite duration counts as 0."""
    if not len(cols["kind"]):
        return cols
    step, value = cols["step"], cols["value"]
    keep = (step >= 0) & (step <= n_steps) & np.isfinite(value) & (value >= 0)
    if not keep.all():
        outside = int(((step < 0) | (step > n_steps)).sum())
        what = []
        if outside:
            first = int(step[(step < 0) | (step > n_steps)][0])
            what.append(f"{outside} at a step outside the run's 0..{n_steps} (e.g. {first})")
        if int((~keep).sum()) - outside:
            what.append(f"{int((~keep).sum()) - outside} with a negative count")
        steps_lost = n_steps == 0 and any(w.startswith(STEPS_FILE) for w in warnings)
        if what and not (steps_lost and outside == int((~keep).sum())):
            # events past a step file already said lost are its loss, not a second damage
            warnings.append(f"{EVENTS_FILE}: {'; '.join(what)}: the file is damaged; dropped")
        cols = {c: col[keep] for c, col in cols.items()}
    seconds = cols["seconds"]
    bad = ~(np.isfinite(seconds) & (seconds >= 0))
    if bad.any():
        cols = dict(cols)
        cols["seconds"] = np.where(bad, 0.0, seconds)
        n = int(bad.sum())
        warnings.append(f"{EVENTS_FILE}: {counted(n, 'duration')} that "
                        f"{'is not a time' if n == 1 else 'are not times'} (the file is "
                        f"damaged); {'it counts' if n == 1 else 'they count'} as 0")
    return cols


class _LazyRef:
    """``ref[i]``: the value of intern id ``i`` (None for 0), decoded once."""

    def __init__(self, decode: Any):
        self._decode = decode
        self._cache: dict[int, Any] = {}

    def __getitem__(self, i: int) -> Any:
        i = int(i)
        if i == 0:
            return None
        try:
            return self._cache[i]
        except KeyError:
            value = self._cache[i] = self._decode(i)
            return value



def pod_beats(path: Path) -> tuple[set[int], dict[int, tuple[int, str]]]:
    """The hosts that left anything under a pod's directory (``host<N>/``), and the host count
    their heartbeats (``upload.json``, the part's or its ranks') declare: ``{host: (hosts,
    where its launcher said it)}``."""
    seen: set[int] = set()
    declared: dict[int, tuple[int, str]] = {}
    try:
        entries = list(path.iterdir())
    except OSError:
        return seen, declared
    for entry in entries:
        name = entry.name
        if not (name.startswith("host") and name[4:].isdigit() and entry.is_dir()):
            continue
        host = int(name[4:])
        seen.add(host)
        for beat in [entry / UPLOAD_FILE, *sorted(entry.glob(f"rank*/{UPLOAD_FILE}"))]:
            try:
                data = json.loads(beat.read_text())
            except (OSError, ValueError):
                continue
            hosts = data.get("hosts") if isinstance(data, dict) else None
            if isinstance(hosts, int) and not isinstance(hosts, bool) and hosts > 0:
                declared[host] = (hosts, str(data.get("hosts_from") or "its launcher"))
                break
    return seen, declared


def load_target(path: str | os.PathLike[str]) -> Run | RankedRun | PodRun:
    """A run, a multi-process run (:class:`~lazyscope.model.RankedRun`) when ``path`` holds
    ``rank<N>/`` runs, or a pod (:class:`~lazyscope.model.PodRun`) when it holds ``host<N>/``
    parts (a run written to a URL, downloaded)."""
    path = Path(path)
    hosts = host_dirs(path) if _is_dir(path) else {}
    if hosts:
        parts: dict[int, Run | RankedRun] = {}
        for host, part in hosts.items():
            loaded = load_target(part)
            assert not isinstance(loaded, PodRun)
            parts[host] = loaded
        seen, declared = pod_beats(path)
        return PodRun(path=path, hosts=parts, seen=seen | set(parts), declared=declared)
    ranks = rank_dirs(path) if _is_dir(path) else {}
    if not ranks:
        if _is_dir(path) and not (path / META_FILE).exists():
            # host parts none of which is a run (its meta.json lost): the error names the part
            parts = sorted(p for p in path.glob("host*") if p.name[4:].isdigit() and _is_dir(p))
            if parts:
                return load_target(parts[0])
        return load_run(path)
    parent = read_meta(path)[0] if is_run_dir(path) else None
    return RankedRun(path=path, parent=parent,
                     ranks={r: load_run(p) for r, p in ranks.items()})


def _annotations(path: Path, warnings: list[str]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(_lines(path, warnings), 1):
        try:
            obj = json.loads(line.decode("utf-8"))
            step = int(obj.pop("step"))
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            raise RunDirError(f"{show_path(path)} line {number} is not a valid annotation: the run file is "
                              "corrupt") from None
        out.setdefault(step, {}).update(obj)
    return out
