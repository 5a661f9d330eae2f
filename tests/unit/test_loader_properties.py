"""Property tests of the run loader: any truncation or corruption of a saved run either loads
(and renders) or raises RunDirError, never anything else.

* Truncation of ``steps.bin`` / ``events.bin`` at any byte (a kill mid-write) always loads:
  every whole record is kept and at most the last, cut-off record is lost (with a warning;
  events left at steps the cut removed are dropped, with a warning);
  truncation of ``intern.jsonl`` loads as long as no kept event needs the lost entries.
* Garbage anywhere (bytes overwritten, inserted, deleted; an intern line or a meta field
  replaced by arbitrary JSON) loads or raises RunDirError; whatever loads renders as text and
  JSON and passes through ``check`` and ``diff`` without an exception.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyscope.analyze.check import Rules, check_report
from lazyscope.analyze.diff import diff_reports
from lazyscope.analyze.report import build_report
from lazyscope.core.errors import RunDirError
from lazyscope.render.json import render_json
from lazyscope.render.text import render_text
from lazyscope.store import EVENT_DTYPE, load_run, step_dtype
from lazyscope.store.layout import EVENTS_FILE, INTERN_FILE, META_FILE, STEPS_FILE

DATA = Path(__file__).resolve().parents[1] / "data" / "xla"
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def _fresh(workdir: Path, name: str = "dynamic20") -> Path:
    dst = workdir / "run"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(DATA / name, dst)
    return dst


def _exercise(run_dir: Path) -> None:
    """Load and use a run; only RunDirError may escape."""
    report = build_report(load_run(run_dir))
    render_text(report)
    json.loads(render_json(report))
    check_report(report, Rules(max_recompiles=0, max_syncs_per_step=0, no_fallbacks=True,
                               max_step_seconds=0.01))
    diff_reports(report, report)


@SETTINGS
@given(data=st.data(), which=st.sampled_from([STEPS_FILE, EVENTS_FILE]),
       name=st.sampled_from(["dynamic20", "static20"]))
def test_any_truncation_of_records_loses_at_most_the_cut_record(workdir, data, which,
                                                                  name) -> None:
    run_dir = _fresh(workdir, name)
    raw = (run_dir / which).read_bytes()
    schema = json.loads((run_dir / META_FILE).read_text())["schema_version"]
    size = (step_dtype(schema) if which == STEPS_FILE else EVENT_DTYPE).itemsize
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
    (run_dir / which).write_bytes(raw[:cut])
    run = load_run(run_dir)
    loaded = (len(run.steps) + (run.steps.tail is not None)) if which == STEPS_FILE \
        else len(run.events)
    assert loaded == cut // size
    assert any("cut off mid-write" in w for w in run.warnings) == bool(cut % size)
    # steps cut away leave events at steps the run no longer has: dropped, and said
    assert all("cut off mid-write" in w or "outside the run" in w for w in run.warnings)
    _exercise(run_dir)


@SETTINGS
@given(data=st.data())
def test_truncating_the_intern_file_loads_or_says_corrupt(workdir, data) -> None:
    run_dir = _fresh(workdir)
    raw = (run_dir / INTERN_FILE).read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
    (run_dir / INTERN_FILE).write_bytes(raw[:cut])
    try:
        _exercise(run_dir)
    except RunDirError as err:
        assert str(err) and "\n" not in str(err)


_MUTATIONS = st.sampled_from(["overwrite", "insert", "delete"])


@SETTINGS
@given(data=st.data(), which=st.sampled_from([STEPS_FILE, EVENTS_FILE, INTERN_FILE, META_FILE]),
       how=_MUTATIONS, junk=st.binary(min_size=1, max_size=16))
def test_random_garbage_is_loaded_or_rundirerror(workdir, data, which, how, junk) -> None:
    run_dir = _fresh(workdir)
    raw = (run_dir / which).read_bytes()
    at = data.draw(st.integers(min_value=0, max_value=len(raw)), label="at")
    if how == "overwrite":
        raw = raw[:at] + junk + raw[at + len(junk):]
    elif how == "insert":
        raw = raw[:at] + junk + raw[at:]
    else:
        raw = raw[:at] + raw[at + len(junk):]
    (run_dir / which).write_bytes(raw)
    try:
        _exercise(run_dir)
    except RunDirError as err:
        assert str(err) and "\n" not in str(err)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
_META_KEYS = ["status", "warmup_steps", "args", "info", "schema_version", "target", "error",
              "steps_requested", "versions", "device", "backend", "capabilities", "rank"]


@SETTINGS
@given(data=st.data(), which=st.sampled_from([INTERN_FILE, META_FILE]))
def test_wrong_types_in_any_field_are_loaded_or_rundirerror(workdir, data, which) -> None:
    """Well-formed JSON whose values have any type (a buggy or hostile writer)."""
    run_dir = _fresh(workdir)
    path = run_dir / which
    if which == META_FILE:
        obj = json.loads(path.read_text())
        obj[data.draw(st.sampled_from(_META_KEYS))] = data.draw(_JSON)
        path.write_text(json.dumps(obj))
    else:
        lines = path.read_text().splitlines()
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        obj = json.loads(lines[i])
        if isinstance(obj, dict) and obj and data.draw(st.booleans()):
            key = next(iter(obj))
            if isinstance(obj[key], dict) and obj[key] and data.draw(st.booleans()):
                inner = data.draw(st.sampled_from(sorted(obj[key])), label="field")
                obj[key][inner] = data.draw(_JSON, label="value")
            else:
                obj[key] = data.draw(_JSON, label="value")
        else:
            obj = data.draw(_JSON, label="value")
        lines[i] = json.dumps(obj)
        path.write_text("\n".join(lines) + "\n")
    try:
        _exercise(run_dir)
    except RunDirError as err:
        assert str(err) and "\n" not in str(err)
