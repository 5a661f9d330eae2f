"""Each healthy program (tests/programs/healthy/), traced with the real CLI in a fresh
process, gets no finding and passes `lazyscope check` with its defaults; xp.StepTrace and the
parallel loader are step barriers. (A file of its own: pytest-xdist runs it beside
test_pitfalls.py, whose session fixture traces every pitfall.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import lazyscope_cmd, report_json, trace_all
from tests.programs import healthy

pytestmark = pytest.mark.xla


@pytest.fixture(scope="session")
def healthy_runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    return trace_all(tmp_path_factory.mktemp("healthy"),
                     {name: healthy.script(name) for name in healthy.HEALTHY})


@pytest.mark.parametrize("name", healthy.HEALTHY)
def test_healthy_program_has_no_finding_and_passes_check(healthy_runs, name) -> None:
    run, report = healthy_runs[name]
    assert report["status"] == "ok" and report["findings"] == [], report["findings"]
    assert report["clean"] and report["verdict"].startswith("no recompilation in steady state")
    proc = lazyscope_cmd("check", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr



def test_steptrace_and_parallel_loader_are_step_barriers(tmp_path: Path) -> None:
    script = tmp_path / "loaders.py"
    script.write_text(textwrap.dedent("""\
        import torch, torch_xla
        import torch_xla.debug.profiler as xp
        import torch_xla.distributed.parallel_loader as pl
        dev = torch_xla.device()
        w = torch.ones(8, device=dev)
        for i in range(3):
            with xp.StepTrace("step", step_num=i):
                w = w * 2
        data = [torch.ones(4, 8) for _ in range(3)]
        for batch in pl.MpDeviceLoader(data, dev):
            w = w + batch.sum()
        torch_xla.sync()
        """))
    out = tmp_path / "run"
    proc = lazyscope_cmd("trace", "--out", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    report = report_json(out)
    # 3 StepTrace exits; the loader syncs before each batch but the first (a StepTrace just
    # marked the step), before the end-of-data fetch and at StopIteration (4); the final sync
    assert report["steps"] == 8, report["per_step"]
    assert report["status"] == "ok"


def test_a_read_every_n_steps_is_priced_and_never_told_to_read_every_n(tmp_path: Path) -> None:
    """``float(loss)`` in a dict every 5 steps, before the barrier: the line already reads
    every N steps. Its finding (or note) says so and what it costs; its fix never asks for what
    the line does."""
    script = Path(healthy.__file__).parent.parent / "log_dict_every_n.py"
    out = tmp_path / "log"
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(script))
    assert proc.returncode == 0, proc.stderr
    report = report_json(out)
    (f,) = [f for f in report["findings"] + report["notes"] if f["kind"] == "sync"]
    assert "reads every 5 steps" in f["detail"] and "% of the run's wall time" in f["detail"]
    assert "every N steps or after the loop" not in f["fix"]
    assert "already reads every 5 steps" in f["fix"] or "nothing to change" in f["fix"]


def test_a_closure_optimizers_first_steps_are_warm_up_not_recompiles(tmp_path: Path) -> None:
    """L-BFGS cuts its first steps into many graphs (its history fills up), each compiled once
    and most run once, then reuses them all: no recompile finding, and check passes. Its host
    reads are torch's own, named inside torch.optim.LBFGS with what reads less."""
    script = Path(healthy.__file__).parent.parent / "lbfgs_closure.py"
    out = tmp_path / "lbfgs"
    proc = lazyscope_cmd("trace", "--out", str(out), "--no-views", str(script))
    assert proc.returncode == 0, proc.stderr
    report = report_json(out)
    assert report["compiles"] >= 20 and report["per_step"][-1]["compiles"] == 0
    assert not [f for f in report["findings"] if f["kind"] == "recompile"], report["findings"]
    assert report["verdict"].startswith("no recompilation in steady state")
    syncs = [f for f in report["findings"] if f["kind"] == "sync"]
    assert syncs and all("torch/optim/lbfgs.py" in f["happens_at"]["file"] for f in syncs)
    assert all("max_iter" in f["fix"] for f in syncs)
    check = lazyscope_cmd("check", str(out))
    assert check.returncode == 0, check.stdout
