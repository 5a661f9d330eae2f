"""`lazyscope trace --profile` on real XLA:CPU, the scalars, and `lazyscope tensorboard` serving
them through a real TensorBoard with the profile plugin (queried over HTTP, then stopped)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lazyscope.cli import main
from lazyscope.commands.tensorboard import free_port
from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd

pytestmark = [pytest.mark.xla, pytest.mark.slow]


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("profiled") / "run"
    proc = lazyscope_cmd("trace", "--steps", "6", "--profile-steps", "1:4", "--out", str(out),
                         "lazytensor-dynamic", "--mode", "static", "--size", "64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return body


def _serve(run: Path, *options: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`lazyscope tensorboard RUN OPTIONS` in a child process, and the lines it prints (read as
    they come)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lazyscope", "tensorboard", *options, str(run)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                     daemon=True).start()
    return proc, lines


def _trace_events(run: Path) -> list[dict]:
    (capture,) = sorted((run / "tensorboard" / "plugins" / "profile").iterdir())
    (trace,) = capture.glob("*.trace.json.gz")
    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def test_profile_window_captures_whole_steps(profiled_run: Path) -> None:
    run = load_run(profiled_run)
    assert run.meta.info["profile"] == {
        "logdir": "tensorboard", "requested_steps": [1, 4], "captured_steps": [1, 4]}
    captures = list((profiled_run / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(captures) == 1 and captures[0].stat().st_size > 1000
    events = _trace_events(profiled_run)
    steps = sorted(int(e["args"]["step_num"]) for e in events
                   if e.get("name") == "dummy_step" and e.get("ph") == "X")
    assert steps == [1, 2, 3]  # StepTrace of each step in the window, whole
    assert sum(1 for e in events if e.get("name") == "forward") >= 3  # backend.region
    # the program marks its steps itself (StepTrace): lazyscope adds no second marker
    assert not [e for e in events if e.get("name") == "lazyscope_step"]


def test_scalars_match_the_steps(profiled_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(profiled_run / "tensorboard"))
    acc.Reload()
    run = load_run(profiled_run)
    assert "lazyscope/step_time_ms" in acc.Tags()["scalars"]
    times = acc.Scalars("lazyscope/step_time_ms")
    assert [e.step for e in times] == [s.index for s in run.steps]
    assert [e.value for e in times] == pytest.approx([s.wall_s * 1e3 for s in run.steps], rel=1e-5)
    comps = [e.value for e in acc.Scalars("lazyscope/compilations")]
    assert comps == [float(s.compile_count) for s in run.steps] and sum(comps) >= 1
    # re-rendering replaces the scalars instead of adding a second copy
    assert main(["report", str(profiled_run)]) == 0
    assert len(list((profiled_run / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_tensorboard_serves_the_profile(profiled_run: Path) -> None:
    port = free_port()
    proc, lines = _serve(profiled_run, "--port", str(port))
    try:
        deadline = time.monotonic() + 120
        while not lines and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert lines, f"no URL printed; exit {proc.poll()}: {proc.stderr.read() if proc.poll() is not None else ''}"
        assert f"http://127.0.0.1:{port}/" in lines[0]
        base = f"http://127.0.0.1:{port}"
        plugins = json.loads(_get(f"{base}/data/plugins_listing"))
        assert "profile" in plugins, sorted(plugins)
        (capture,) = [p.name for p in (profiled_run / "tensorboard/plugins/profile").iterdir()]
        runs: list = []
        while time.monotonic() < deadline:  # the plugin lists runs once it has scanned logdir
            runs = json.loads(_get(f"{base}/data/plugin/profile/runs"))
            if capture in runs:
                break
            time.sleep(1)
        assert capture in runs, runs
        tools = json.loads(_get(f"{base}/data/plugin/profile/run_tools?run={capture}"))
        assert "trace_viewer" in json.dumps(tools) or "overview_page" in json.dumps(tools), tools
        tags = json.loads(_get(f"{base}/data/plugin/scalars/tags"))
        assert "lazyscope/step_time_ms" in tags["."]
    finally:
        proc.terminate()  # SIGTERM: the command stops its TensorBoard child, then exits
        proc.wait(timeout=30)
    gone = False
    for _ in range(40):
        try:
            _get(f"http://127.0.0.1:{port}/data/plugins_listing")
        except (urllib.error.URLError, OSError):
            gone = True
            break
        time.sleep(0.5)
    assert gone, "TensorBoard still answers after `lazyscope tensorboard` was stopped"


def test_bad_profile_steps_is_one_line(capsys) -> None:
    code = main(["trace", "--profile-steps", "4:2", "--out", "/nonexistent/x", "lazytensor-dynamic"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["lazyscope: --profile-steps A:B needs 0 <= A < B, got '4:2'"]


def test_tensorboard_on_missing_run_is_one_line(tmp_path: Path, capsys) -> None:
    code = main(["tensorboard", str(tmp_path / "nope")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and err[0].startswith("lazyscope: ")


# -- a script that marks no steps: lazyscope marks them, XProf's overview shows step time -------

MARK_STEP_LOOP = """\
import torch, torch_xla
import torch_xla.core.xla_model as xm
dev = torch_xla.device()
w = torch.randn(64, 64).to(dev)
for step in range(6):
    x = torch.randn(16, 64).to(dev)
    y = torch.tanh(x @ w).sum()
    xm.mark_step()
"""


@pytest.fixture(scope="module")
def script_profile(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("script_profile")
    script = base / "loop.py"
    script.write_text(MARK_STEP_LOOP)
    out = base / "run"
    proc = lazyscope_cmd("trace", "--profile-steps", "1:4", "--out", str(out), str(script))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_a_loop_without_step_trace_gets_lazyscope_steps(script_profile: Path) -> None:
    events = _trace_events(script_profile)
    marks = [e for e in events if e.get("name") == "lazyscope_step" and e.get("ph") == "X"]
    assert sorted(int(e["args"]["step_num"]) for e in marks) == [1, 2, 3]
    assert all(e["dur"] > 0 for e in marks)
    # one after the other on one thread, never overlapping
    marks.sort(key=lambda e: e["ts"])
    assert len({(e["pid"], e["tid"]) for e in marks}) == 1
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(marks, marks[1:], strict=False))


def test_tensorboard_overview_shows_each_step(script_profile: Path) -> None:
    """Through the profile plugin's own data endpoint (what its overview page draws): one row
    per step of the window with its time, and no "No step marker observed" diagnostic; the
    count table in the Text tab; links that open the scalars unsmoothed."""
    port = free_port()
    proc, lines = _serve(script_profile, "--host", "0.0.0.0", "--port", str(port))
    try:
        deadline = time.monotonic() + 120
        while len(lines) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        text = "".join(lines)
        base = f"http://127.0.0.1:{port}"
        assert f"{base}/?smoothing=0#timeseries" in text, text
        assert f"{base}/#scalars&_smoothingWeight=0" in text and f"{base}/#text" in text
        assert "device fields stay 0" in text  # said next to the profile link on XLA:CPU
        (capture,) = [p.name for p in (script_profile / "tensorboard/plugins/profile").iterdir()]
        while time.monotonic() < deadline:
            if capture in json.loads(_get(f"{base}/data/plugin/profile/runs")):
                break
            time.sleep(1)
        (host,) = json.loads(_get(f"{base}/data/plugin/profile/hosts?run={capture}"
                                  "&tag=overview_page"))
        tables = json.loads(_get(f"{base}/data/plugin/profile/data?run={capture}"
                                 f"&tag=overview_page&host={host['hostname']}"))
        step_graph = next(t for t in tables if isinstance(t, dict) and any(
            c["id"] == "stepnum" for c in t.get("cols", [])))
        ids = [c["id"] for c in step_graph["cols"]]
        rows = [[c.get("v") for c in r["c"]] for r in step_graph["rows"]]
        assert [r[ids.index("stepnum")] for r in rows] == [
            "lazyscope_step 1", "lazyscope_step 2", "lazyscope_step 3"]
        assert all(r[ids.index("stepTimeMs")] > 0 for r in rows), rows
        assert float(step_graph["p"]["steptime_ms_average"]) > 0
        assert step_graph["p"]["hardware_type"] == "CPU_ONLY"
        assert "No step marker observed" not in json.dumps(tables)
        counts = json.loads(_get(f"{base}/data/plugin/text/text?run=.&tag="
                                 "lazyscope/per_step_counts"))
        assert "<th>compilations</th>" in counts[0]["text"]
        assert counts[0]["text"].count("<tr>") == 1 + 6  # the header and every step
    finally:
        proc.terminate()
        proc.wait(timeout=30)
