"""Schema 1 (``steps.jsonl``, ``events.jsonl``, written by lazyscope 0.1), read and converted
into the schema-2 model in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lazyscope.core.errors import RunDirError
from lazyscope.model import (
    EVENT_KINDS,
    STEP_FIELDS,
    Capabilities,
    Compile,
    Fallback,
    FallbackExec,
    Frame,
    GraphBreak,
    GraphInput,
    Meta,
    Run,
    Stack,
    StepTable,
    Sync,
    table_from_events,
)
from lazyscope.model.ownership import is_library_file
from lazyscope.model.steps import STEP_FIELDS_V2
from lazyscope.store.layout import V1_EVENTS_FILE, V1_STEPS_FILE
from lazyscope.store.records import lost_steps


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RunDirError(f"cannot read {path}: {err.strerror}") from None


#: what the schema-1 backends measured (their other fields were written as 0)
V1_MEASURED = {
    "xla": list(STEP_FIELDS_V2),
    "eager": ["wall_s", "t_end_s", "compile_count", "compile_s"],
    "compile": ["wall_s", "t_end_s", "compile_count", "compile_s"],
}


def _v1_jsonl(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    raw = _read_bytes(path)
    if raw is None:
        warnings.append(f"{path.name} is missing: what it recorded is lost")
        return
    raw = raw.rstrip(b"\x00")
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for number, line in enumerate(lines[: last + 1], start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            if number - 1 == last and not complete_end:
                warnings.append(f"{path.name}: line {number} was cut off mid-write (the run was "
                                "killed); it was skipped")
                return
            raise RunDirError(
                f"{path} line {number} is not a valid JSON object: the run file is corrupt"
            ) from None
        yield number, obj


def _v1_step(obj: dict[str, Any]) -> tuple[str, int, dict[str, float], dict[str, int], dict]:
    def group(name: str) -> dict[str, Any]:
        value = obj.get(name) or {}
        if not isinstance(value, dict):
            raise ValueError(f"'{name}' is not an object")
        return value

    comp, exe = group("compile"), group("execute")
    to_dev, from_dev = group("to_device"), group("from_device")
    fallback = obj.get("fallback_ops") or {}
    extra = obj.get("extra") or {}
    if not isinstance(fallback, dict) or not isinstance(extra, dict):
        raise ValueError("'fallback_ops' and 'extra' must be objects")
    fallbacks = {str(k): int(v) for k, v in fallback.items()}
    values = {
        "wall_s": float(obj.get("wall_s", 0.0)), "t_end_s": float(obj.get("t_end_s", 0.0)),
        "compile_count": int(comp.get("count", 0)), "compile_s": float(comp.get("seconds", 0.0)),
        "execute_count": int(exe.get("count", 0)), "execute_s": float(exe.get("seconds", 0.0)),
        "to_device_count": int(to_dev.get("count", 0)),
        "to_device_bytes": int(to_dev.get("bytes", 0)),
        "to_device_s": float(to_dev.get("seconds", 0.0)),
        "from_device_count": int(from_dev.get("count", 0)),
        "from_device_bytes": int(from_dev.get("bytes", 0)),
        "from_device_s": float(from_dev.get("seconds", 0.0)),
        "fallback_count": sum(fallbacks.values()),
    }
    return str(obj.get("kind", "step")), int(obj["step"]), values, fallbacks, extra


def _v1_frame(value: Any) -> Frame | None:
    """A schema-1 frame, classified. Schema-1 runs were recorded by other checkouts: a frame of
    lazyscope's own package there (``.../lazyscope/backends/xla.py``) is library code too."""
    if not isinstance(value, dict) or "file" not in value:
        return None
    file = str(value["file"])
    norm = file.replace("\\", "/")
    own = "/lazyscope/" in norm and "/lazyscope/scenarios/" not in norm
    return Frame(file, int(value.get("line", 0)), str(value.get("function", "")),
                 own or is_library_file(file))


def _v1_event(obj: dict[str, Any]) -> tuple[str, int, float, Stack, Any, str, float]:
    """A schema-1 event as (kind, step, seconds, stack, payload, key, value)."""
    kind = str(obj["kind"])
    step = int(obj.get("step", -1))
    seconds = float(obj.get("seconds", 0.0))
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError("'data' must be an object")
    frames = [f for f in (_v1_frame(f) for f in obj.get("frames") or []) if f is not None]
    site = _v1_frame(obj.get("site"))
    if site is not None and site not in frames:
        frames.insert(0, Frame(site.file, site.line, site.function, False))
    stack = tuple(frames)
    if kind in ("compile", "compile_backward"):
        inputs = None
        if isinstance(data.get("input_shapes"), list):
            dtypes = data.get("input_dtypes") or []
            inputs = [GraphInput(str(dtypes[i]) if i < len(dtypes) else "", [int(d) for d in s])
                      for i, s in enumerate(data["input_shapes"])]
        payload: Any = Compile(
            phase="backward" if kind == "compile_backward" else
            ("forward" if "compile_id" in data else "graph"),
            cause=str(data.get("cause") or data.get("xla_cause") or ""),
            cause_kind=str(data.get("cause_kind", "")),
            function=str(data.get("frame", "")),
            inputs=inputs,
            num_inputs=data.get("num_inputs"), num_outputs=data.get("num_outputs"),
            ops=data.get("ops"), digest=data.get("ir_digest"), donors=data.get("buffer_donors"),
            hlo_file=data.get("hlo_file"),
        )
        key = str(data.get("graph_hash") or data.get("compile_id") or "")
        return "compile", step, seconds, stack, payload, key, 0.0
    if kind == "sync":
        payload = Sync(read=str(data.get("read", "")), shape=data.get("shape"),
                       message=str(data.get("message", "")))
        return "sync", step, seconds, stack, payload, "", float(data.get("executions", 0) or 0)
    if kind == "fallback":
        return ("fallback", step, seconds, stack, Fallback(op=str(data.get("op", ""))), "",
                float(data.get("calls", 1) or 1))
    if kind == "graph_break":
        return ("graph_break", step, seconds, stack, GraphBreak(reason=str(data.get("reason", ""))),
                "", 0.0)
    raise ValueError(f"unknown event kind {kind!r}")


def load_v1(path: Path, meta: Meta) -> Run:
    """A schema-1 run (JSON lines), converted into the schema-2 model in memory."""
    warnings: list[str] = []
    measured = V1_MEASURED.get(meta.backend, list(STEP_FIELDS_V2))
    # schema 1 recorded no executions per graph
    meta.capabilities = Capabilities(step_fields=measured, events=[
        k for k in EVENT_KINDS if k != "execute"])
    rows: list[tuple[int, dict[str, float]]] = []
    tail: dict[str, float] | None = None
    annotations: dict[int, dict[str, Any]] = {}
    events: list[tuple[str, int, float, Stack, Any, str, float]] = []
    for number, obj in _v1_jsonl(path / V1_STEPS_FILE, warnings):
        try:
            kind, index, values, fallbacks, extra = _v1_step(obj)
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(f"{path / V1_STEPS_FILE} line {number} is not a valid step "
                              f"({err}): the run file is corrupt") from None
        if kind == "tail":
            tail = values
        else:
            rows.append((index, values))
        if extra:
            annotations[index] = extra
        for op, n in fallbacks.items():
            events.append(("fallback_exec", index, 0.0, (), FallbackExec(op), "", float(n)))
    rows.sort(key=lambda r: r[0])
    if not rows and tail is None:
        lost_steps(meta, V1_STEPS_FILE, warnings)
    columns = {f: np.array([v.get(f, np.nan) for _, v in rows], dtype=np.float64)
               for f in STEP_FIELDS}
    for number, obj in _v1_jsonl(path / V1_EVENTS_FILE, warnings):
        try:
            events.append(_v1_event(obj))
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise RunDirError(f"{path / V1_EVENTS_FILE} line {number} is not a valid event "
                              f"({err}): the run file is corrupt") from None
    return Run(path=path, meta=meta,
               steps=StepTable(columns, measured, tail, annotations),
               events=table_from_events(events), warnings=warnings)
