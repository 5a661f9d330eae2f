"""Shared fixtures. Expensive XLA runs are made once per session, each in its own process
(torch_xla's compile cache lives for the whole process, so compile counts need fresh ones)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

os.environ.setdefault("PJRT_DEVICE", "CPU")
# gcsfs reads this once, when it is first imported (a test module's importorskip("gcsfs") at
# collection): left on (gcsfs 2026.10's default), each bucket's first request waits ~60 s on a
# gRPC lookup the storage emulator cannot answer
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
#: XLA:CPU compiles each graph through LLVM at -O2 by default, about half of an XLA test's
#: CPU time (a Trainer's 8 steps: 68 s of CPU, 33 s at -O0, the same 17 graphs and
#: executions). The tests count graphs and read their HLO, never the generated code's speed;
#: the flag is one more in XLA_FLAGS (lazyscope adds its dump flag beside it, as beside a
#: user's), set for every process the tests start. Benchmarks do not set it.
FAST_XLA_CPU = "--xla_backend_optimization_level=0"
if FAST_XLA_CPU not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), FAST_XLA_CPU]))


def optimized_xla_env() -> dict[str, str]:
    """``XLA_FLAGS`` without :data:`FAST_XLA_CPU`, for the tests that time where a step's time
    goes: under ``torch.compile(backend="openxla")`` the compiled graph runs inside the
    program's Python call, so code compiled at -O0 reads as host time there."""
    return {"XLA_FLAGS": " ".join(w for w in os.environ.get("XLA_FLAGS", "").split()
                                  if w != FAST_XLA_CPU)}


def lazyscope_cmd(*args: str, cwd: Path | None = None, timeout: float = 600,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `lazyscope` CLI in a fresh process (python -m lazyscope)."""
    # the checkout first; a PYTHONPATH already set stays after it (a checkout run without
    # installing reaches lazyscope_scenarios through it)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": path, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lazyscope", *args],
        cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout,
    )


def report_json(run_dir: Path) -> dict:
    proc = lazyscope_cmd("report", str(run_dir), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def trace_all(base: Path, scripts: dict[str, Path],
              options: dict[str, list[str]] | None = None,
              env: dict[str, str] | None = None) -> dict[str, tuple[Path, dict]]:
    """`lazyscope trace [OPTIONS] SCRIPT --no-views` for each script (two at a time), with its
    JSON report: {name: (run dir, report)}. ``options``: lazyscope options per name; ``env``:
    variables set for every trace."""

    def trace(item: tuple[str, Path]) -> tuple[str, tuple[Path, dict]]:
        name, script = item
        out = base / name
        # the findings are read from the JSON report: no PNGs or HTML needed
        proc = lazyscope_cmd("trace", *(options or {}).get(name, []), "--out", str(out),
                             "--no-views", str(script), env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return name, (out, report_json(out))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(trace, scripts.items()))


@pytest.fixture
def data_run(tmp_path: Path):
    """Copy a saved run from tests/data (schema-2 XLA runs under tests/data/xla, found by
    their bare name) into a temp dir (renderers write plots into it)."""

    def copy(name: str) -> Path:
        src = DATA / name if (DATA / name).is_dir() else DATA / "xla" / name
        dst = tmp_path / name.replace("/", "_")
        shutil.copytree(src, dst)
        return dst

    return copy


@pytest.fixture(scope="session")
def lazytensor_runs(tmp_path_factory) -> dict[str, Path]:
    """`lazyscope trace lazytensor-dynamic` in static and dynamic mode, 20 steps, real XLA:CPU."""
    base = tmp_path_factory.mktemp("lazytensor")
    runs = {}
    for mode in ("static", "dynamic"):
        out = base / mode
        proc = lazyscope_cmd("trace", "--steps", "20", "--out", str(out), "lazytensor-dynamic",
                             "--mode", mode)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[mode] = out
        runs[mode + "_stdout"] = proc.stdout
    return runs


#: the bucket the session's GCS API server starts with
GCS_BUCKET = "lazyscope-pod"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def gcs() -> dict[str, str]:
    """A GCS API server for the session: the environment that points gcsfs at it."""
    exe = shutil.which("gcp-storage-emulator") or str(
        Path(sys.executable).parent / "gcp-storage-emulator")
    if not os.path.exists(exe):
        pytest.skip("gcp-storage-emulator is not installed (pip install gcp-storage-emulator)")
    port = _free_port()
    proc = subprocess.Popen([exe, "start", "--port", str(port), "-H", "127.0.0.1",
                             "--default-bucket", GCS_BUCKET, "-q", "-M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the storage emulator did not start")
            time.sleep(0.1)
    yield {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
           "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    proc.terminate()
    proc.wait(timeout=10)
