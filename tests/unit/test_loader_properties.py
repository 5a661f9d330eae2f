"""Property tests of the run loader: any truncation or corruption of a saved run either loads
(and renders) or raises RunDirError, never anything else.

* Truncation of ``steps.jsonl`` / ``events.jsonl`` at any byte (a kill mid-write) always loads:
  every complete line is kept and at most the last, cut-off line is lost (with a warning).
* Garbage anywhere (bytes overwritten, inserted, deleted; a line replaced by arbitrary JSON)
  loads or raises RunDirError; whatever loads renders as text and JSON and passes through
  ``check`` and ``diff`` without an exception.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyscope.analyze.check import Rules, check_run
from lazyscope.analyze.diff import diff_runs
from lazyscope.errors import RunDirError
from lazyscope.model import EVENTS_FILE, META_FILE, STEPS_FILE, load_run
from lazyscope.render.json import render_json
from lazyscope.render.text import render_text

DATA = Path(__file__).resolve().parents[1] / "data"
SETTINGS = settings(max_examples=150, deadline=None,
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
    run = load_run(run_dir)
    render_text(run)
    json.loads(render_json(run))
    check_run(run, Rules(max_compiles_after_warmup=0, max_syncs_per_step=0, no_fallbacks=True,
                         max_step_seconds=0.01))
    diff_runs(run, run)


@SETTINGS
@given(data=st.data(), which=st.sampled_from([STEPS_FILE, EVENTS_FILE]),
       name=st.sampled_from(["dynamic20", "static20"]))
def test_any_truncation_loads_losing_at_most_the_last_line(workdir, data, which, name) -> None:
    run_dir = _fresh(workdir, name)
    raw = (run_dir / which).read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
    prefix = raw[:cut]
    (run_dir / which).write_bytes(prefix)
    run = load_run(run_dir)
    whole_lines = prefix.count(b"\n")
    rest = prefix[prefix.rfind(b"\n") + 1:]
    # the cut-off remainder counts only if it happens to be the whole line (cut at its newline)
    rest_is_whole = bool(rest) and raw[cut:cut + 1] == b"\n"
    expected = whole_lines + (1 if rest_is_whole else 0)
    loaded = len(run.all_steps()) if which == STEPS_FILE else len(run.events)
    assert loaded == expected
    assert bool(run.warnings) == (bool(rest) and not rest_is_whole)
    _exercise(run_dir)


_MUTATIONS = st.sampled_from(["overwrite", "insert", "delete"])


@SETTINGS
@given(data=st.data(), which=st.sampled_from([STEPS_FILE, EVENTS_FILE, META_FILE]),
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
_STEP_KEYS = ["step", "kind", "wall_s", "t_end_s", "compile", "execute", "to_device",
              "from_device", "fallback_ops", "extra"]
_EVENT_KEYS = ["kind", "step", "seconds", "site", "frames", "data"]
_META_KEYS = ["status", "warmup_steps", "args", "info", "schema_version", "target", "error",
              "steps_requested", "versions", "device", "backend"]


@SETTINGS
@given(data=st.data(), which=st.sampled_from([STEPS_FILE, EVENTS_FILE, META_FILE]))
def test_wrong_types_in_any_field_are_loaded_or_rundirerror(workdir, data, which) -> None:
    """A well-formed JSON line whose fields hold values of any type (a buggy or hostile writer)."""
    run_dir = _fresh(workdir)
    path = run_dir / which
    keys = {STEPS_FILE: _STEP_KEYS, EVENTS_FILE: _EVENT_KEYS, META_FILE: _META_KEYS}[which]
    if which == META_FILE:
        obj = json.loads(path.read_text())
        obj[data.draw(st.sampled_from(keys))] = data.draw(_JSON)
        path.write_text(json.dumps(obj))
    else:
        lines = path.read_text().splitlines()
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        obj = json.loads(lines[i])
        key = data.draw(st.sampled_from(keys), label="key")
        value = data.draw(_JSON, label="value")
        if key in ("compile", "execute", "to_device", "from_device") and data.draw(st.booleans()):
            obj[key] = {data.draw(st.sampled_from(["count", "seconds", "bytes", "hashes"])): value}
        else:
            obj[key] = value
        lines[i] = json.dumps(obj)
        path.write_text("\n".join(lines) + "\n")
    try:
        _exercise(run_dir)
    except RunDirError as err:
        assert str(err) and "\n" not in str(err)
