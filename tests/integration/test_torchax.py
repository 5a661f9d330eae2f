"""End to end on real torchax 0.0.13 and jax 0.10.2 (JAX's CPU backend): the torchax backend,
each program in tests/programs/torchax/ traced in a fresh process with no ``--backend`` (a
script that imports torchax and not torch_xla is traced on torchax), its report read as JSON.

Tiny models (a 16-wide embedding, 8x8 matrices) and 6-8 steps each: most of the time is each
process importing torch, jax and torchax."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lazyscope.store import load_run
from tests.conftest import REPO, lazyscope_cmd, report_json

pytestmark = [pytest.mark.torchax, pytest.mark.slow]

PROGRAMS = REPO / "tests" / "programs" / "torchax"
CASES: dict[str, tuple[str, list[str]]] = {
    "longest": ("padding.py", ["--batches", "8"]),
    "buckets": ("padding.py", ["--batches", "8", "--buckets"]),
    "item": ("padding.py", ["--batches", "8", "--buckets", "--item"]),
    "jit_loop": ("jit_in_loop.py", []),
    "jit_once": ("jit_in_loop.py", ["--once"]),
    "eager": ("eager_shapes.py", []),
    "eager_fixed": ("eager_shapes.py", ["--fixed"]),
    "causes": ("causes.py", []),
    "missing": ("missing_op.py", []),
    "reads": ("reads.py", []),
}


def line_of(path: Path, marker: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if marker in t)


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    base = tmp_path_factory.mktemp("torchax")

    def trace(item: tuple[str, tuple[str, list[str]]]) -> tuple[str, tuple[Path, object]]:
        name, (script, args) = item
        out = base / name
        proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", "-q",
                             str(PROGRAMS / script), *args)
        return name, (out, proc)

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(pool.map(trace, CASES.items()))
    for name, (_, proc) in done.items():
        expected = 5 if name == "missing" else 0  # TargetFailed: the program raised
        assert proc.returncode == expected, name + proc.stdout[-3000:] + proc.stderr[-3000:]
    return done  # type: ignore[return-value]


def report(runs, name: str) -> dict:
    return report_json(runs[name][0])


def test_a_script_importing_torchax_is_traced_on_torchax(runs) -> None:
    for name in CASES:
        run = load_run(runs[name][0])
        assert run.meta.backend == "torchax", name
        assert run.meta.device.startswith("jax (cpu"), run.meta.device
        assert {"torchax", "jax", "jaxlib", "torch"} <= set(run.meta.versions)


def test_padding_to_the_longest_is_a_recompile_finding_at_the_collate_function(runs) -> None:
    script = PROGRAMS / "padding.py"
    rep = report(runs, "longest")
    (f,) = [f for f in rep["findings"] if f["kind"] == "recompile"]
    assert (f["file"], f["line"]) == (str(script), line_of(script, "def pad_to_longest"))
    assert f["compiled_at"]["line"] == line_of(script, "loss, params, opt_state = train_step")
    # the user's names: make_train_step's step(weights, buffers, opt_state, args, label)
    assert "args['input_ids'] varies in dim 1" in f["detail"]
    assert "pad_to_longest" in f["fix"]
    assert f["count"] == 7 and rep["steps"] == 8
    assert "a step is one call of the jitted function make_train_step.<locals>.step" in \
        " ".join(rep["run_notes"])
    check = lazyscope_cmd("check", str(runs["longest"][0]), "--max-recompiles", "0")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "max-recompiles" in check.stdout


def test_bucketed_padding_is_clean_and_passes_check(runs) -> None:
    rep = report(runs, "buckets")
    assert [f for f in rep["findings"] if f["kind"] == "recompile"] == []
    assert any(n["kind"] == "reuse" for n in rep["notes"])
    check = lazyscope_cmd("check", str(runs["buckets"][0]), "--max-recompiles", "0")
    assert check.returncode == 0, check.stdout + check.stderr


def test_compile_counts_are_jax_s_own(runs) -> None:
    """JAX's count of the same program run untraced (a jax.monitoring listener on
    backend_compile_duration, what jax_log_compiles logs) equals the run's."""
    for name in ("longest", "eager"):
        script, args = CASES[name]
        proc = subprocess.run([sys.executable, str(PROGRAMS / "count_compiles.py"),
                               str(PROGRAMS / script), *args], capture_output=True, text=True,
                              timeout=300, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-2000:]
        jax_count = int(proc.stdout.strip().splitlines()[-1].split(": ")[1])
        run = load_run(runs[name][0])
        assert run.events.count("compile") == jax_count, name
        steps = run.steps.col("compile_count")
        tail = run.steps.tail or {}
        assert int(steps.sum()) + int(tail.get("compile_count", 0) or 0) == jax_count, name
        assert run.meta.run_info.runtime_counts == {"jax backend compiles": jax_count}


def test_each_compile_has_jax_s_phases_and_the_graph_s_memory(runs) -> None:
    run = load_run(runs["longest"][0])
    steps = [e for e in run.events.iter("compile") if e.data.phase == "graph"
             and e.data.owner == "user"]
    assert len(steps) == 8
    for e in steps:
        phases = e.data.phases
        assert set(phases) == {"trace", "lower", "compile"} and all(v > 0 for v in phases.values())
        assert abs(sum(phases.values()) - e.seconds) < 1e-6
        assert e.data.memory is not None and e.data.memory.total > 0
        assert "args['input_ids']" in {i.name for i in e.data.inputs}
    rep = report(runs, "longest")
    memory = rep["memory"]
    assert memory["peak_at"]["line"] == line_of(PROGRAMS / "padding.py", "train_step(params")
    assert memory["peak"]["shape"].startswith("int32[4,") and memory["peak"]["graph"].startswith("step#")
    too_small = lazyscope_cmd("check", str(runs["longest"][0]), "--max-graph-memory", "1000")
    assert too_small.returncode == 1 and "max-graph-memory" in too_small.stdout, \
        too_small.stdout + too_small.stderr
    roomy = lazyscope_cmd("check", str(runs["longest"][0]), "--max-graph-memory", "1GB")
    assert roomy.returncode == 0, roomy.stdout + roomy.stderr


def test_a_jit_made_in_the_loop_is_named_with_its_fix(runs) -> None:
    script = PROGRAMS / "jit_in_loop.py"
    rep = report(runs, "jit_loop")
    (f,) = [f for f in rep["findings"] if f["kind"] == "recompile"]
    assert f["line"] == line_of(script, "x = fn(w, x)") and f["count"] == 5
    assert "jit the function once, before the loop" in f["fix"]
    run = load_run(runs["jit_loop"][0])
    again = [e.data for e in run.events.iter("compile") if e.data.cause_kind == "new_function"]
    assert len(again) == 5
    assert f"jitted again at {script}:{line_of(script, 'fn = jitted')}" in again[0].cause
    assert report(runs, "jit_once")["findings"] == []


def test_a_read_every_step_is_a_sync_finding_at_its_line(runs) -> None:
    script = PROGRAMS / "padding.py"
    rep = report(runs, "item")
    (f,) = [f for f in rep["findings"] if f["kind"] == "sync"]
    assert (f["file"], f["line"]) == (str(script), line_of(script, "loss.item()"))
    assert f["count"] == 8 and ".item()" in f["detail"]
    assert "read it every N steps or after the loop" in f["fix"]
    assert rep["syncs"] == 8


def test_every_host_read_is_a_sync_at_its_line(runs) -> None:
    script = PROGRAMS / "reads.py"
    run = load_run(runs["reads"][0])
    seen: dict[int, list[str]] = {}
    for e in run.events.iter("sync"):
        seen.setdefault(e.site.line, []).append(e.data.read)
    expected = {".item()": "item", "float(tensor)": "float", ".cpu()": "cpu",
                ".numpy()": "numpy", ".tolist()": "tolist", "print(tensor) / str": "print",
                "jax.device_get": "device_get", "numpy.asarray": "asarray"}
    for read, marker in expected.items():
        assert seen.get(line_of(script, f"# read: {marker}")) == [read] * 3, (read, seen)
    assert sum(len(v) for v in seen.values()) == 24  # nothing else (a read inside a read)


def test_eager_ops_recompiling_per_shape_are_a_finding_to_jit_the_step(runs) -> None:
    script = PROGRAMS / "eager_shapes.py"
    rep = report(runs, "eager")
    (f,) = [f for f in rep["findings"] if f["kind"] == "recompile"]
    assert f["line"] == line_of(script, "y = model(x)")
    assert "ops run eagerly were compiled" in f["detail"] and "jit the step" in f["fix"]
    assert rep["steps"] == 8
    assert report(runs, "eager_fixed")["findings"] == []


def test_each_cause_is_said_in_the_user_s_names(runs) -> None:
    run = load_run(runs["causes"][0])
    causes = [e.data for e in run.events.iter("compile") if e.data.phase == "graph"
              and e.data.owner == "user"]
    assert [c.cause_kind for c in causes] == ["first"] + ["recompile"] * 4
    said = [(c.changes[0].input, c.changes[0].what) for c in causes[1:]]
    assert said == [("batch['x']", "dim"), ("offset", "dtype"), ("scale", "value"),
                    ("batch", "count")]
    assert "f32 (weak)" == causes[2].changes[0].after
    assert "a static argument changed (static scale: 2.0 -> 3.0)" in causes[3].cause


def test_an_op_without_a_lowering_is_a_finding_at_the_user_s_line(runs) -> None:
    script = PROGRAMS / "missing_op.py"
    out, proc = runs["missing"]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "OperatorNotFound" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    rep = report_json(out)
    (f,) = [f for f in rep["findings"] if f["kind"] == "fallback"]
    assert (f["file"], f["line"]) == (str(script), line_of(script, "# lazyscope-expect"))
    assert "aten::geqrf has no torchax lowering" in f["detail"]
    assert rep["steps"] == 2


def test_the_report_s_other_forms_work_on_torchax_runs(runs, tmp_path) -> None:
    longest, buckets = str(runs["longest"][0]), str(runs["buckets"][0])
    diff = lazyscope_cmd("diff", longest, buckets)
    assert diff.returncode == 0 and "recompil" in diff.stdout, diff.stdout + diff.stderr
    export = lazyscope_cmd("export", longest, "--format", "csv", "--out", str(tmp_path))
    assert export.returncode == 0, export.stderr
    assert (tmp_path / "steps.csv").read_text().count("\n") >= 8
    html = lazyscope_cmd("report", buckets, "--format", "html")
    assert html.returncode == 0 and (runs["buckets"][0] / "report.html").exists(), html.stderr
    as_json = json.loads(lazyscope_cmd("report", longest, "--format", "json").stdout)
    assert as_json["backend"] == "torchax"


def test_the_pytest_marker_fails_the_recompiling_test(tmp_path: Path) -> None:
    from tests.integration.test_pytest_plugin import run_pytest

    proc, test_file = run_pytest(PROGRAMS / "guarded_tests.py", tmp_path)
    out = proc.stdout
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out + proc.stderr
    assert f"[recompile] {test_file}:{line_of(test_file, 'step(weight, batch)')} " in out, out


def test_advise_emits_a_loader_that_runs_on_torchax(runs, tmp_path) -> None:
    """The code `advise --emit` prints for the padding run, given to the same program as its
    DataLoader: its graphs are the buckets', each compiled once; diff shows the recompiles go."""
    before = runs["longest"][0]
    emit = lazyscope_cmd("advise", str(before), "--emit", "--no-model-changes")
    assert emit.returncode == 0, emit.stderr
    code = tmp_path / "loader.py"
    code.write_text(emit.stdout)
    after = tmp_path / "after"
    proc = lazyscope_cmd("trace", "--out", str(after), "--no-views", "-q",
                         str(PROGRAMS / "padding.py"), "--batches", "8", "--loader", str(code))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = report_json(after)
    assert [f for f in rep["findings"] if f["kind"] == "recompile"] == []
    assert any(n["kind"] == "reuse" and "one per bucket met" in n["detail"]
               for n in rep["notes"])
    diff = lazyscope_cmd("diff", str(before), str(after))
    assert diff.returncode == 0
    row = next(ln.split() for ln in diff.stdout.splitlines() if ln.split()[:1] == ["recompiles"])
    assert row[1:4] == ["7", "0", "-7"], diff.stdout


def test_the_decoder_scenario_compares_policies_on_torchax(tmp_path) -> None:
    """decoder runs its step as one jitted function on torchax (Runtime.compiled_step), so
    `compare` sets pad-to-longest against one static shape on JAX too."""
    out = tmp_path / "cmp"
    proc = lazyscope_cmd("compare", "--policies", "longest,max", "--steps", "6", "--backends",
                         "torchax", "--out", str(out), "decoder", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["ran"]: r for r in json.loads((out / "compare.json").read_text())["rows"]}
    assert rows["longest"]["status"] == rows["max"]["status"] == "ok"
    shapes = rows["longest"]["distinct_shapes"]
    assert shapes >= 3 and rows["max"]["distinct_shapes"] == 1
    longest = report_json(Path(rows["longest"]["path"]))
    (f,) = [f for f in longest["findings"] if f["kind"] == "recompile"
            and "varies in dim 1" in f["detail"]]
    assert "args.inputs varies in dim 1" in f["detail"] and f["count"] == shapes - 1
    assert longest["steps"] == 6 and longest["backend"] == "torchax"
