"""End to end on real torch (CPU): the eager and compile backends, traced in fresh processes.

Each torch.compile symptom has a small user script in tests/programs/compile/
(``backend="aot_eager"``: dynamo and AOTAutograd without inductor's slow CPU codegen), traced
with and without ``lazyscope.barrier()``; one run goes through inductor (``padding.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = pytest.mark.slow

PITFALLS = REPO / "tests" / "programs" / "compile"
PADDING = PITFALLS / "padding.py"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def marked_line(script: Path) -> int:
    return next(i for i, ln in enumerate(script.read_text().splitlines(), 1)
                if "# lazyscope-expect:" in ln)


CASES = {
    "recompile_backward": ("recompile_backward.py", []),
    "recompile_backward_nobarrier": ("recompile_backward.py", ["--no-barrier"]),
    "graph_break_nobarrier": ("graph_break.py", ["--no-barrier"]),
    "recompile_limit": ("recompile_limit.py", []),
    "recompile_limit_nobarrier": ("recompile_limit.py", ["--no-barrier"]),
    "whole_function": ("whole_function.py", []),
    "automatic_dynamic": ("automatic_dynamic.py", []),
    "bucketed": ("bucketed.py", []),
}


@pytest.fixture(scope="session")
def compile_runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("compile")
    runs: dict[str, Path] = {}
    for name, (script, args) in CASES.items():
        out = base / name
        proc = lazyscope_cmd("trace", "--backend", "compile", "--out", str(out), "--no-views",
                             str(PITFALLS / script), *args, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (out / "stdout.txt").write_text(proc.stdout)
        runs[name] = out
    return runs


@pytest.mark.parametrize("name", ["recompile_backward", "recompile_backward_nobarrier"])
def test_a_recompile_with_backward_is_at_the_calling_line(compile_runs, name) -> None:
    """Not at loss.backward() (the lazy backward compile reuses the compile id), with every
    argument that changed, forward and backward compile time apart; steps or not."""
    script = PITFALLS / "recompile_backward.py"
    report = report_json(compile_runs[name])
    (f,) = [f for f in report["findings"] if f["kind"] == "recompile"]
    assert (f["file"], f["line"]) == (str(script), marked_line(script))
    assert f["compiled_at"]["function"] == "forward"
    assert {c["input"] for c in f["changes"]} == {"x", "mask"}
    assert f["count"] == 3 and "backward compile" in f["detail"]
    assert "mark_dynamic" in f["fix"]
    assert report["steps"] == (4 if name == "recompile_backward" else 0)


def test_a_graph_break_without_steps_is_a_finding_with_its_reason(compile_runs) -> None:
    script = PITFALLS / "graph_break.py"
    report = report_json(compile_runs["graph_break_nobarrier"])
    assert report["steps"] == 0
    (f,) = [f for f in report["findings"] if f["kind"] == "graph_break"]
    assert (f["file"], f["line"]) == (str(script), marked_line(script))
    assert "Tensor.item()" in f["reason"] and "capture_scalar_outputs" in f["fix"]
    assert any("lazyscope.barrier()" in n for n in report["run_notes"])


def test_the_recompile_limit_is_an_eager_fallback(compile_runs) -> None:
    script = PITFALLS / "recompile_limit.py"
    report = report_json(compile_runs["recompile_limit"])
    (f,) = [f for f in report["findings"] if f["kind"] == "eager_fallback"]
    assert (f["file"], f["line"]) == (str(script), marked_line(script))
    assert f["limit"] == 3 and "size mismatch at index 1" in f["last_reason"]
    assert "runs eagerly" in f["detail"] and f["steps"] == [3]
    # the attempt that hit the limit compiled nothing: it is no compilation
    assert report["compiles"] == 3


def test_each_recompile_keeps_its_own_arguments_when_the_limit_follows(compile_runs) -> None:
    """Three compiles and the limit-hit attempt in one step (no barrier): each recompile is
    paired with the arguments of its own call, not with the later call's."""
    report = report_json(compile_runs["recompile_limit_nobarrier"])
    (f,) = [f for f in report["findings"] if f["kind"] == "recompile"]
    dims = [(c["input"], c["before"], c["after"]) for c in f["changes"] if c["what"] == "dim"]
    assert dims == [("x", 4, 6), ("x", 6, 9)]
    (e,) = [f for f in report["findings"] if f["kind"] == "eager_fallback"]
    assert e["limit"] == 3


def test_a_function_dynamo_cannot_trace_at_all_is_a_graph_break(compile_runs) -> None:
    """A break under a user context manager: dynamo logs no graph break and compiles nothing;
    the function runs eagerly at every call. Found at the offending line, caller below it."""
    script = PITFALLS / "whole_function.py"
    report = report_json(compile_runs["whole_function"])
    (f,) = report["findings"]
    assert (f["kind"], f["file"], f["line"]) == ("graph_break", str(script),
                                                 marked_line(script))
    assert [fr["line"] for fr in f["stack"]][1:] == [marked_line(script) + 6]
    assert "runs eagerly, uncompiled, at every call" in f["detail"]
    assert "context manager" in f["fix"] and report["compiles"] == 0


def test_automatic_dynamic_is_a_note_that_says_so(compile_runs) -> None:
    script = PITFALLS / "automatic_dynamic.py"
    report = report_json(compile_runs["automatic_dynamic"])
    assert report["findings"] == [] and report["clean"]
    (note,) = report["notes"]
    assert (note["file"], note["line"]) == (str(script), marked_line(script))
    assert note["dynamic"] == ["x dim 1"] and "switched x dim 1 to dynamic" in note["fix"]
    check = lazyscope_cmd("check", str(compile_runs["automatic_dynamic"]))
    assert check.returncode == 0, check.stdout


def test_bucketed_compile_is_reused_warm_up_and_passes_check(compile_runs) -> None:
    """Each compiled variant's calls are counted (execute events keyed by compile id): three
    buckets compiled once each and then reused are warm-up, not a recompile finding."""
    script = PITFALLS / "bucketed.py"
    run = load_run(compile_runs["bucketed"])
    ev = run.events
    calls: dict[str, float] = {}
    for i in ev.indices("execute"):
        e = ev.event(int(i))
        calls[e.key] = calls.get(e.key, 0) + e.value
    assert sorted(calls) == ["0/0", "0/1", "0/2"] and sum(calls.values()) == 12
    assert min(calls.values()) >= 3
    report = report_json(compile_runs["bucketed"])
    assert report["findings"] == [] and report["clean"]
    (note,) = report["notes"]
    assert note["kind"] == "reuse" and (note["file"], note["line"]) == (str(script), 31)
    assert "run 3-5 times" in note["detail"]
    check = lazyscope_cmd("check", str(compile_runs["bucketed"]))
    assert check.returncode == 0, check.stdout


def test_device_is_a_trace_option_not_the_scripts(tmp_path: Path) -> None:
    out = tmp_path / "own"
    proc = lazyscope_cmd("trace", "--backend", "compile", "--device", "cpu", "--out", str(out),
                         str(PITFALLS / "own_arguments.py"), "--steps", "2", timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "own_arguments: 2 steps" in proc.stdout
    assert load_run(out).meta.args == ["--steps", "2"]


def test_inductor_static_padding_compiles_once(tmp_path: Path) -> None:
    out = tmp_path / "max"
    proc = lazyscope_cmd("trace", "--backend", "compile", "--steps", "4", "--device", "cpu",
                         "--out", str(out), str(PADDING), "--policy", "max",
                         timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = report_json(out)
    assert report["steps"] == 4 and report["status"] == "ok" and report["compiles"] >= 1
    assert report["findings"] == [] and report["verdict"].startswith(
        "no recompilation in steady state")
    assert any("set_sync_debug_mode needs a CUDA device" in n for n in report["run_notes"])
    assert report["executions"] is None  # torch has no per-step execution counter


def test_eager_runs_without_torch_xla(tmp_path: Path) -> None:
    """lazyscope with torch_xla unimportable (as on a GPU box): eager traces the XLA scenario."""
    out = tmp_path / "eager"
    code = (
        "import sys; sys.modules['torch_xla'] = None\n"
        "from lazyscope.cli import main\n"
        f"rc = main(['trace', '--backend', 'eager', '--steps', '4', '--out', {str(out)!r}, "
        f"'lazytensor-dynamic', '--mode', 'dynamic'])\n"
        "assert 'torch_xla' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin",
                                                       "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "lazytensor-dynamic dynamic: 4 steps" in proc.stdout
    report = report_json(out)
    assert report["backend"] == "eager" and report["steps"] == 4 and report["compiles"] == 0


def test_device_cuda_without_gpu_is_a_clear_error(tmp_path: Path) -> None:
    if _cuda_available():
        pytest.skip("a CUDA device is present: the no-GPU error cannot happen here")
    proc = lazyscope_cmd("trace", "--backend", "eager", "--steps", "2", "--out", str(tmp_path / "c"),
                         "--device", "cuda", "lazytensor-dynamic")
    assert proc.returncode == 4
    assert "no CUDA device is usable here" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.gpu
def test_cuda_sync_events_name_the_user_line(tmp_path: Path) -> None:
    if not _cuda_available():
        pytest.skip("no CUDA device: torch.cuda.set_sync_debug_mode sync events need a GPU")
    out = tmp_path / "cuda"
    proc = lazyscope_cmd("trace", "--backend", "eager", "--steps", "4", "--out", str(out),
                         "--device", "cuda", "lazytensor-dynamic", "--read-loss")
    assert proc.returncode == 0, proc.stderr
    syncs = list(load_run(out).events.iter("sync"))
    assert len(syncs) >= 4
    assert all(e.site.file.endswith("lazytensor_dynamic.py") for e in syncs)


@pytest.mark.gpu
def test_cuda_syncs_of_a_compiled_loop_at_their_lines_with_the_stall(tmp_path: Path) -> None:
    """``.cpu()`` after the compiled forward and ``loss.item()`` after the backward: two syncs a
    step, each at its line, each with the time the host waited for the GPU (seconds > 0; the
    ``.item()`` waits for a backward of 4 layers of 8192x4096x4096, milliseconds on any GPU).
    Other syncs may be there too (``.cuda()`` copies the weights from pageable memory)."""
    if not _cuda_available():
        pytest.skip("no CUDA device: torch.cuda.set_sync_debug_mode sync events need a GPU")
    script = PITFALLS / "cuda_syncs.py"
    lines = [i for i, ln in enumerate(script.read_text().splitlines(), 1)
             if "# lazyscope-expect: sync" in ln]
    out = tmp_path / "syncs"
    proc = lazyscope_cmd("trace", "--backend", "compile", "--device", "cuda", "--out", str(out),
                         "--no-views", str(script), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    syncs = list(load_run(out).events.iter("sync"))
    by_line: dict[int, list] = {}
    for e in syncs:
        assert e.site is not None and e.site.file.endswith("cuda_syncs.py"), e.site
        by_line.setdefault(e.site.line, []).append(e)
    assert set(lines) <= set(by_line), (sorted(by_line), lines)
    for line in lines:
        events = by_line[line]
        assert len(events) >= 6  # one a step at least
        stalls = sorted(e.seconds for e in events)
        assert stalls[len(stalls) // 2] > 1e-4, (line, stalls)  # the median step waited
    text = lazyscope_cmd("report", str(out))
    assert text.returncode == 0
    print(text.stdout)
    for line in lines:
        assert f"cuda_syncs.py:{line}" in text.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("read", [False, True], ids=["barrier", "read"])
def test_cuda_step_anatomy_input_device_and_syncs(tmp_path: Path, read: bool) -> None:
    """The step anatomy on CUDA: a DataLoader that takes ~16 ms a batch, matmuls on the GPU,
    and (``read``) a ``loss.item()`` every step. Each steady step's parts sum to its wall time;
    the input part holds the loader's sleep (8 x 2 ms at least); the GPU's time is the
    barrier's wait (``device``) or, with the read, the read's (``syncs``)."""
    if not _cuda_available():
        pytest.skip("no CUDA device: the CUDA step anatomy needs a GPU")
    out = tmp_path / "anatomy"
    proc = lazyscope_cmd("trace", "--backend", "eager", "--device", "cuda", "--out", str(out),
                         "--no-views", str(PITFALLS / "cuda_anatomy.py"),
                         *(["--read"] if read else []), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = report_json(out)
    steady = data["anatomy"]["steady"]
    print(data["anatomy"])
    parts = sum(steady[k] for k in ("input_s", "host_s", "compile_s", "device_s", "sync_s",
                                    "other_s"))
    assert abs(parts - steady["wall_s"]) <= 0.05 * steady["wall_s"]
    assert steady["input_s"] >= 0.016
    for row in data["per_step"]:
        a = row["anatomy"]
        assert abs(a["wall_s"] - row["wall_s"]) <= 0.05 * row["wall_s"] + 1e-4, row
    waited = steady["sync_s"] if read else steady["device_s"]
    other = steady["device_s"] if read else steady["sync_s"]
    assert waited > 1e-3 and waited > other, data["anatomy"]
