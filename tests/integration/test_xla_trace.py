"""End to end on real torch_xla (XLA:CPU): the LazyTensor scenario, traced in fresh processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.backends.xla.dump import dump_dir_owner_alive
from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.xla
SCENARIOS = REPO / "scenarios"


def compile_events(run_dir: Path) -> list:
    return list(load_run(run_dir).events.iter("compile"))


def test_dynamic_mode_recompiles_every_step(lazytensor_runs) -> None:
    summary = report_json(lazytensor_runs["dynamic"])
    assert summary["steps"] == 20 and summary["status"] == "ok"
    assert summary["distinct_graphs"] == summary["compiles"] == 20
    (finding,) = summary["findings"]
    assert finding["kind"] == "recompile" and finding["count"] == 19
    line = (SCENARIOS / "lazytensor_dynamic.py").read_text().splitlines()[finding["line"] - 1]
    assert "torch.cat" in line  # the line to change, not the barrier
    assert summary["verdict"].startswith("recompiles in steady state: 19 recompilations")


def test_static_mode_compiles_nothing_in_steady_state(lazytensor_runs) -> None:
    summary = report_json(lazytensor_runs["static"])
    assert summary["steps"] == 20 and summary["compiles"] >= 1
    assert summary["findings"] == [] and summary["clean"]
    assert summary["fallback_ops"] == {}


def test_trace_prints_report_and_writes_files(lazytensor_runs) -> None:
    out = lazytensor_runs["dynamic_stdout"]
    assert "lazytensor-dynamic dynamic: 20 steps" in out  # the scenario's own output
    assert "verdict: recompiles in steady state: 19 recompilations" in out
    run = lazytensor_runs["dynamic"]
    for name in ("meta.json", "steps.bin", "events.bin", "intern.jsonl", "timeline.png",
                 "report.html"):
        assert (run / name).is_file(), name
    meta = json.loads((run / "meta.json").read_text())
    assert meta["versions"]["torch_xla"].startswith("2.9")
    # schema 3: steps carry their anatomy (input, barrier, sync, own time)
    assert meta["status"] == "ok" and meta["ended_at"] and meta["schema_version"] == 3
    assert meta["device"].startswith("xla:0")  # recorded once the program made the device


def test_compile_events_name_the_barrier_and_the_line_to_change(lazytensor_runs) -> None:
    compiles = compile_events(lazytensor_runs["dynamic"])
    assert len(compiles) == 20
    source = (SCENARIOS / "lazytensor_dynamic.py").read_text().splitlines()
    for event in compiles:
        site = event.site
        assert site.file.endswith("scenarios/lazytensor_dynamic.py")
        assert "backend.step(" in source[site.line - 1]  # where the graph was cut
        assert event.data.cause_kind == "barrier" and "StepTrace" in event.data.cause
    assert len({e.key for e in compiles}) == 20
    # IR source lines are on in warm-up and after compiling steps: the accumulated loss
    # input names the torch.cat line that made it
    origins = {i.origin.line for e in compiles[1:] for i in e.data.inputs if i.origin}
    assert any("torch.cat" in source[n - 1] for n in origins)


_METRICS_DRIVER = r"""
import json, sys
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
mode, out, scenario = sys.argv[1:4]
argv = sys.argv[4:]
if mode == "traced":
    from lazyscope.backends.base import TraceOptions
    from lazyscope.backends.runner import resolve_target, trace_target
    trace_target(resolve_target(scenario, argv), out, options=TraceOptions())
else:
    import importlib
    module = importlib.import_module("lazyscope_scenarios." + scenario.replace("-", "_"))
    module.main(argv)
xm.wait_device_ops()  # executions are asynchronous: count them all
counts = {}
for name in ("CompileTime", "TransferFromDeviceTime", "ExecuteTime"):
    data = met.metric_data(name)
    counts[name] = data[0] if data else 0
for name in ("OutboundData", "InboundData"):  # bytes: the accumulated value
    data = met.metric_data(name)
    counts[name] = int(data[1]) if data else 0
print("COUNTS " + json.dumps(counts))
"""

WORKLOADS = {
    # one .item() per step: 8 device-to-host transfers
    "lazytensor": ("lazytensor-dynamic", ["--mode", "static", "--read-loss", "--steps", "8"]),
    # composite ops (SDPA, layer norm, GELU) and a new shape at most steps: a collector that
    # changed how ops are dispatched would change the graphs and compile more
    "decoder": ("decoder", ["--padding", "longest", "--mode", "eval", "--steps", "6",
                            "--max-len", "32", "--batch", "4"]),
}


def _metric_counts(mode: str, out: Path, workload: str) -> dict:
    scenario, argv = WORKLOADS[workload]
    proc = subprocess.run(
        [sys.executable, "-c", _METRICS_DRIVER, mode, str(out), scenario, *argv], cwd=REPO,
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS "))
    return json.loads(line[len("COUNTS "):])


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_tracing_adds_no_compilation_and_no_transfer(tmp_path: Path, workload: str) -> None:
    untraced = _metric_counts("untraced", tmp_path / "unused", workload)
    traced = _metric_counts("traced", tmp_path / "traced", workload)
    if workload == "lazytensor":
        assert untraced["TransferFromDeviceTime"] == 8  # the test can fail
    else:
        assert untraced["CompileTime"] >= 3  # several batch lengths: the test can fail
    assert traced["CompileTime"] == untraced["CompileTime"]
    assert traced["TransferFromDeviceTime"] == untraced["TransferFromDeviceTime"]
    assert traced["ExecuteTime"] == untraced["ExecuteTime"]
    # the byte totals the run recorded (read only at barriers whose transfer count moved, and
    # at the end) are torch_xla's own
    assert untraced["OutboundData"] > 0 and traced["OutboundData"] == untraced["OutboundData"]
    report = report_json(tmp_path / "traced")
    assert report["bytes_to_device"] == traced["OutboundData"]
    assert report["bytes_from_device"] == traced["InboundData"]
    if workload == "lazytensor":
        assert traced["InboundData"] > 0  # the .item() reads: the test can fail
    # ... and each step's bytes go with that step's transfers (the program transfers on its
    # own thread: both samples are in before the barrier that follows)
    steps = load_run(tmp_path / "traced").steps
    for way in ("to_device", "from_device"):
        count, size = steps.col(f"{way}_count"), steps.col(f"{way}_bytes")
        assert count is not None and size is not None
        assert ((count > 0) == (size > 0)).all(), way


def test_cli_subprocess_unknown_scenario() -> None:
    proc = lazyscope_cmd("trace", "no-such-scenario")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "lazyscope: unknown scenario 'no-such-scenario'; scenarios: "
        + ", ".join(sorted(__import__("lazyscope_scenarios").SCENARIOS))
        + " (or give the path of a .py script)"
    )


def test_scenario_runs_standalone() -> None:
    proc = subprocess.run([sys.executable, "scenarios/lazytensor_dynamic.py", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and "--mode {static,dynamic}" in proc.stdout


def test_trace_a_user_script_that_raises(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch, torch_xla\n"
        "dev = torch_xla.device()\n"
        "w = torch.ones(4, device=dev)\n"
        "for step in range(5):\n"
        "    w = w * 2\n"
        "    torch_xla.sync()\n"
        "    if step == 2:\n"
        "        raise ValueError('boom at step 2')\n"
    )
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--out", str(out), str(script))
    assert proc.returncode == 5, proc.stderr
    assert "ValueError: boom at step 2" in proc.stderr and "train.py:8" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    summary = report_json(out)
    assert summary["status"] == "failed" and summary["steps"] == 3
    assert "boom" in (out / "error.txt").read_text()


def test_steps_limit_stops_a_script_and_no_views_draws_nothing(tmp_path: Path) -> None:
    """--steps N stops a script after N barriers; --no-views prints the report but writes no
    report.html, PNG or TensorBoard scalars (``report --format html`` makes them later)."""
    script = tmp_path / "loop.py"
    script.write_text(
        "import torch, torch_xla\n"
        "dev = torch_xla.device()\n"
        "w = torch.ones(4, device=dev)\n"
        "while True:\n"
        "    w = w + 1\n"
        "    torch_xla.sync()\n"
    )
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--steps", "4", "--out", str(out), "--no-views", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "verdict: " in proc.stdout and "steps           4" in proc.stdout
    summary = report_json(out)
    assert summary["steps"] == 4 and summary["status"] == "ok"
    assert summary["findings"] == []
    views = ("report.html", "timeline.png", "time_split.png", "cumulative.png", "tensorboard")
    assert not [v for v in views if (out / v).exists()]
    assert lazyscope_cmd("report", str(out), "--format", "html").returncode == 0
    assert all((out / v).exists() for v in views)


def test_graph_shapes_on_by_default_and_off_on_request(lazytensor_runs, tmp_path: Path) -> None:
    """Default: compile events carry each graph's inputs (XLA's HLO dump, paired with the
    compilation) and the run keeps each graph's HLO; with --no-graph-shapes no dump is made,
    compilations are still counted and placed."""
    run = lazytensor_runs["dynamic"]
    compiles = compile_events(run)
    shapes = [[i.shape for i in e.data.inputs] for e in compiles]
    assert all(shapes) and len({json.dumps(s) for s in shapes}) == len(shapes)  # loss grows
    for event in compiles:
        data = event.data
        assert len(data.inputs) == data.num_inputs  # pairing checked on the count
        hlo = (run / data.hlo_file).read_text()
        assert data.hlo_file == f"graphs/{event.key}.hlo.txt"
        assert hlo.startswith("HloModule ") and "entry_computation_layout" in hlo
    # the shapes name the graph that compiled: step k's loss input has one more element
    grown = [s for s in shapes[-1] if s not in shapes[-2]]
    assert grown, shapes[-2:]

    out = tmp_path / "light"
    proc = lazyscope_cmd("trace", "--steps", "6", "--no-graph-shapes", "--out", str(out),
                         "lazytensor-dynamic", "--mode", "dynamic")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "graphs").exists()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["info"]["graph_shapes"] is False
    summary = report_json(out)
    compiles = compile_events(out)
    assert len(compiles) == 6 and not any(e.data.inputs for e in compiles)
    assert all(e.site.file.endswith("lazytensor_dynamic.py") for e in compiles)
    (finding,) = [f for f in summary["findings"] if f["kind"] == "recompile"]
    assert "--no-graph-shapes" in finding["fix"]


SHAPES_SCRIPT = (
    "import torch, torch_xla\n"
    "dev = torch_xla.device()\n"
    "for n in (3, 5, 3, 7):\n"
    "    x = torch.ones(n, 4).to(dev)\n"
    "    y = (x * 2).sum()\n"
    "    torch_xla.sync()\n"
)


def test_hlo_dump_directory_is_ours_and_temporary_or_the_users_and_kept(tmp_path: Path) -> None:
    """lazyscope's own dump directory is a temp dir removed when the process ends; a user's
    own --xla_dump_to is read (shapes recorded) and left as the user wants it."""
    script = tmp_path / "shapes.py"
    script.write_text(SHAPES_SCRIPT)
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()

    def dump_dirs() -> set[Path]:  # /dev/shm when it has room, else TMPDIR
        # those of finished processes only: a trace running beside this test (another
        # pytest-xdist worker) has its own, alive, in /dev/shm
        return {d for d in (*Path("/dev/shm").glob("lazyscope-hlo-*"),
                            *tmp.glob("lazyscope-hlo-*")) if not dump_dir_owner_alive(d)}

    before = dump_dirs()
    out = tmp_path / "own"
    proc = lazyscope_cmd("trace", "--out", str(out), str(script), env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr
    compiles = compile_events(out)
    assert [[i.shape for i in c.data.inputs] for c in compiles] == [
        [[], [3, 4]], [[], [5, 4]], [[], [7, 4]]]  # the scalar 2, x
    assert [c.step for c in compiles] == [0, 1, 3]  # n=3 again at step 2: cached
    assert len(list((out / "graphs").iterdir())) == 3
    assert dump_dirs() <= before  # the temp dump directory is gone with the process

    mine = tmp_path / "my-dump"
    out2 = tmp_path / "users"
    proc = lazyscope_cmd("trace", "--out", str(out2), str(script),
                         env={"TMPDIR": str(tmp), "XLA_FLAGS": f"--xla_dump_to={mine}"})
    assert proc.returncode == 0, proc.stderr
    compiles = compile_events(out2)
    assert [[i.shape for i in c.data.inputs] for c in compiles] == [
        [[], [3, 4]], [[], [5, 4]], [[], [7, 4]]]  # the scalar 2, x
    assert len(list(mine.glob("*.before_optimizations.txt"))) == 3  # left where XLA wrote them
    assert dump_dirs() <= before


SAMPLES_SCRIPT = (
    "import sys, torch, torch_xla\n"
    "import torch_xla.debug.metrics as met\n"
    "x = torch.ones(4, device=torch_xla.device())\n"
    "for _ in range(40):\n"
    "    x = x + 1\n"
    "    torch_xla.sync()\n"
    "torch_xla._XLAC._xla_wait_device_ops([])\n"
    "open(sys.argv[1], 'w').write(str(len(met.metric_data('ExecuteTime')[2])))\n"
)


def test_trace_keeps_few_metric_samples_unless_the_user_chose(tmp_path: Path) -> None:
    """A trace sets XLA_METRICS_SAMPLES=32 (metric_data copies every kept sample at each
    barrier); a value the user set is left alone. Counts are not affected."""
    script = tmp_path / "samples.py"
    script.write_text(SAMPLES_SCRIPT)
    for name, env, expected in (("ours", {}, 32), ("users", {"XLA_METRICS_SAMPLES": "64"}, 40)):
        kept = tmp_path / f"{name}.txt"
        out = tmp_path / name
        proc = lazyscope_cmd("trace", "--out", str(out), str(script), str(kept), env=env)
        assert proc.returncode == 0, proc.stderr
        assert int(kept.read_text()) == expected
        assert report_json(out)["executions"] == 40


ALTERNATING_SCRIPT = """
import torch, torch_xla
d = torch_xla.device()
w = torch.randn(64, 64, device=d)
for i in range(150):
    x = torch.randn(8 if i % 2 else 16, 64).to(d)
    y = (x @ w).relu().sum()
    torch_xla.sync()
"""


def test_each_step_gets_the_graph_it_ran_when_the_debug_file_is_read_in_batches(
        tmp_path: Path) -> None:
    """A barrier only marks torch_xla's debug file; its execution blocks are read every few
    dozen steps and cut at the marks. Two graphs run in turn, 150 steps (two reads and more):
    every step has one execute event, of the graph the other steps of its parity ran."""
    script = tmp_path / "alternating.py"
    script.write_text(ALTERNATING_SCRIPT)
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--out", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    run = load_run(out)
    ev = run.events
    sel = ev.indices("execute")
    steps = ev.step[sel].tolist()
    graphs = [ev.key_of(int(k)) for k in ev.key[sel]]
    assert steps == list(range(150)) and ev.value[sel].tolist() == [1.0] * 150
    # step 0 also runs the set-up (w); from step 1 on, odd and even steps run one graph each
    odd, even = {g for s, g in zip(steps, graphs, strict=True) if s % 2}, \
        {g for s, g in zip(steps, graphs, strict=True) if s and not s % 2}
    assert len(odd) == 1 and len(even) == 1 and odd != even
