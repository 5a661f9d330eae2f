"""End to end on real torch (CPU): the eager and compile backends, traced in fresh processes.

torch.compile is slow on a shared 2-core machine, so the model is two Linear layers, forward
only, and each case runs a handful of steps once per session.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.slow

PADDING = REPO / "scenarios" / "compile_pitfalls" / "padding.py"
USER_LOOP = REPO / "scenarios" / "compile_pitfalls" / "user_loop.py"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


@pytest.fixture(scope="session")
def compile_runs(tmp_path_factory) -> dict[str, Path]:
    """compile: longest policy with a planted graph break (3 steps), and max policy (5 steps)."""
    base = tmp_path_factory.mktemp("compile")
    cases = {
        "longest": ("compile", "3", ["--policy", "longest", "--graph-break", "--device", "cpu"]),
        "max": ("compile", "5", ["--policy", "max"]),
    }
    runs: dict[str, Path] = {}
    for name, (backend, steps, args) in cases.items():
        out = base / name
        proc = lazyscope_cmd("trace", str(PADDING), "--backend", backend, "--steps", steps,
                             "--out", str(out), "--", *args, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[name] = out
        (out / "stdout.txt").write_text(proc.stdout)
    return runs


def test_longest_recompiles_with_guard_naming_dimension_1(compile_runs) -> None:
    run = compile_runs["longest"]
    steps = [json.loads(ln) for ln in (run / "steps.jsonl").read_text().splitlines()]
    lens = [s["extra"]["seq_len"] for s in steps if s["kind"] == "step"]
    assert len(set(lens)) > 1, lens  # the workload really varies the length
    recompiles = [e for e in _events(run)
                  if e["kind"] == "compile" and e["data"]["cause_kind"] == "recompile"]
    assert recompiles, "no recompilation recorded for a varying length"
    varying = [e["data"]["varying"] for e in recompiles if e["data"]["varying"]]
    assert varying and all(v["what"] == "size" and v["index"] == 1 for v in varying)
    assert any(v["expected"] in lens and v["actual"] in lens for v in varying)
    assert "size mismatch at index 1" in (run / "stdout.txt").read_text()
    summary = report_json(run)
    assert summary["compiles"] >= 2 and summary["backend"] == "compile"
    assert summary["compile_seconds"] > 0


def test_planted_graph_break_is_reported_with_its_line(compile_runs) -> None:
    run = compile_runs["longest"]
    breaks = [e for e in _events(run) if e["kind"] == "graph_break"]
    assert breaks, "the planted .item() graph break was not recorded"
    source = PADDING.read_text().splitlines()
    planted = next(i for i, ln in enumerate(source, 1) if "planted graph break" in ln)
    sites = {(e["site"]["file"], e["site"]["line"]) for e in breaks}
    assert (str(PADDING), planted) in sites, sites
    assert any("item" in e["data"]["reason"].lower() for e in breaks)
    assert f"padding.py:{planted}" in (run / "stdout.txt").read_text()


def test_max_policy_compiles_only_in_warmup(compile_runs) -> None:
    summary = report_json(compile_runs["max"])
    assert summary["steps"] == 5 and summary["status"] == "ok"
    assert summary["compiles"] >= 1
    assert summary["compiles_after_warmup"] == 0
    assert not [e for e in _events(compile_runs["max"]) if e["kind"] == "graph_break"]
    assert summary["verdict"].startswith("no recompilation after warm-up")


def test_cpu_report_says_why_sync_events_are_missing(compile_runs) -> None:
    summary = report_json(compile_runs["max"])
    assert any("set_sync_debug_mode needs a CUDA device" in n for n in summary["notes"])
    text = (compile_runs["max"] / "stdout.txt").read_text()
    assert "note        sync events: not collected on cpu" in text


def test_run_format_and_report_same_shape_as_xla(compile_runs, tmp_path: Path) -> None:
    from lazyscope.analyze.summary import summarize
    from lazyscope.model import load_run
    from lazyscope.render import RENDERERS

    xla_dir = tmp_path / "xla"
    shutil.copytree(DATA / "dynamic20", xla_dir)
    xla, comp = load_run(xla_dir), load_run(compile_runs["longest"])
    assert xla.meta.backend == "xla" and comp.meta.backend == "compile"
    assert set(summarize(xla)) == set(summarize(comp))
    step_keys = {json.dumps(sorted(s.to_json())) for r in (xla, comp) for s in r.steps}
    assert len(step_keys) == 1
    for renderer in RENDERERS.values():
        a, b = renderer(xla), renderer(comp)
        assert a and b
    ja, jb = json.loads(RENDERERS["json"](xla)), json.loads(RENDERERS["json"](comp))
    assert set(ja) == set(jb)
    assert set(ja["per_step"][0]) == set(jb["per_step"][0])


def test_eager_runs_without_torch_xla(tmp_path: Path) -> None:
    """lazyscope with torch_xla unimportable (as on a GPU box): eager traces the XLA scenario."""
    out = tmp_path / "eager"
    code = (
        "import sys; sys.modules['torch_xla'] = None\n"
        "from lazyscope.cli import main\n"
        f"rc = main(['trace', 'lazytensor-dynamic', '--backend', 'eager', '--steps', '4', "
        f"'--out', {str(out)!r}, '--mode', 'dynamic'])\n"
        "assert 'torch_xla' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin",
                                                       "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "lazytensor-dynamic dynamic: 4 steps" in proc.stdout
    summary = report_json(out)
    assert summary["backend"] == "eager" and summary["steps"] == 4
    assert summary["compiles"] == 0
    proc = lazyscope_cmd("trace", "lazytensor-dynamic", "--backend", "xla", "--steps", "2",
                         "--out", str(tmp_path / "x"), env={"PYTHONPATH": str(REPO)})
    # the XLA backend still works in a normal process: the block above was local to that one
    assert proc.returncode == 0, proc.stderr


def test_user_script_steps_are_lazyscope_barriers(tmp_path: Path) -> None:
    out = tmp_path / "loop"
    proc = lazyscope_cmd("trace", str(USER_LOOP), "--backend", "compile", "--steps", "2",
                         "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = report_json(out)
    assert summary["steps"] == 2
    compiles = [e for e in _events(out) if e["kind"] == "compile"]
    assert len(compiles) == 2  # dynamic=False: each new length compiles
    assert [e["step"] for e in compiles] == [0, 1]
    assert compiles[1]["data"]["varying"]["index"] == 1
    source = USER_LOOP.read_text().splitlines()
    for event in compiles:  # the compile is tied to the user's call line
        assert event["site"]["file"] == str(USER_LOOP)
        assert "model(" in source[event["site"]["line"] - 1]


def test_device_cuda_without_gpu_is_a_clear_error(tmp_path: Path) -> None:
    if _cuda_available():
        pytest.skip("a CUDA device is present: the no-GPU error cannot happen here")
    proc = lazyscope_cmd("trace", "lazytensor-dynamic", "--backend", "eager", "--steps", "2",
                         "--out", str(tmp_path / "c"), "--device", "cuda")
    assert proc.returncode != 0
    assert "no CUDA device is usable here" in proc.stderr
    assert "failed to stop collection" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_script_without_barrier_gets_a_note(tmp_path: Path) -> None:
    script = tmp_path / "nobarrier.py"
    script.write_text("import torch\nx = torch.ones(3) * 2\n")
    proc = lazyscope_cmd("trace", str(script), "--backend", "eager", "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "note        no step barrier was reached" in proc.stdout
    assert "lazyscope.barrier()" in proc.stdout


@pytest.mark.gpu
def test_cuda_sync_events_name_the_user_line(tmp_path: Path) -> None:
    if not _cuda_available():
        pytest.skip("no CUDA device: torch.cuda.set_sync_debug_mode sync events need a GPU")
    out = tmp_path / "cuda"
    proc = lazyscope_cmd("trace", "lazytensor-dynamic", "--backend", "eager", "--steps", "4",
                         "--out", str(out), "--device", "cuda", "--read-loss")
    assert proc.returncode == 0, proc.stderr
    syncs = [e for e in _events(out) if e["kind"] == "sync"]
    assert len(syncs) >= 4
    assert all(e["site"]["file"].endswith("lazytensor_dynamic.py") for e in syncs)
