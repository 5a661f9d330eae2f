"""A 64-host pod from the bucket: how long `lazyscope report URL` takes.

64 synthetic host parts of 10,000 steps each are written through lazyscope's own writer
(:class:`lazyscope.store.RunWriter`, into a host's spool, exactly as a trace writes) and uploaded
by its own uploader (:class:`lazyscope.store.remote.Uploader`) to a GCS API server
(gcp-storage-emulator, started here on a free port unless ``STORAGE_EMULATOR_HOST`` points at
one). Each step: a step record, a host sync; one compilation at step 0. Host 5 compiles one
graph the others do not (at step 5000), host 37 is a straggler (its steps 2x longer), so the
report has its divergence findings to find.

Then ``lazyscope report gs://BUCKET/pod --format json`` is timed in a fresh process: cold (an
empty cache: every object downloaded, in parallel batches) and warm (nothing changed: the
listing only, every object's generation the same).

    PJRT_DEVICE=CPU python benchmarks/pod_scale.py [--hosts 64] [--steps 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER_FILE = "/home/user/project/train.py"
BUCKET = "lazyscope-bench"


def start_emulator() -> tuple[dict[str, str], subprocess.Popen[bytes] | None]:
    """A gcp-storage-emulator on a free port (unless STORAGE_EMULATOR_HOST names one): the
    environment that points gcsfs at it, and its process."""
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return {}, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = shutil.which("gcp-storage-emulator") or str(Path(sys.executable).parent /
                                                       "gcp-storage-emulator")
    proc = subprocess.Popen([exe, "start", "--port", str(port), "-H", "127.0.0.1",
                             "--default-bucket", BUCKET, "-q", "-M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    return {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}, proc


def write_host(url: str, host: int, steps: int) -> float:
    """Host ``host``'s part: written into its spool by RunWriter, uploaded by the Uploader;
    the seconds it took."""
    from lazyscope.model import Capabilities, Compile, Frame, GraphInput, Meta, Sync
    from lazyscope.store import RunWriter
    from lazyscope.store.remote import Spool, Uploader

    t0 = time.perf_counter()
    spool = Spool.create(url, host)
    meta = Meta(target=USER_FILE, target_kind="script", backend="xla",
                device="xla:0 (CPU:0, synthetic)", capabilities=Capabilities(),
                info={"synthetic": True, "graph_shapes": True})
    writer = RunWriter(spool.part, meta)
    read = (Frame(USER_FILE, 57, "train_step", False), Frame(USER_FILE, 88, "<module>", False))
    barrier = (Frame("/site-packages/torch_xla/torch_xla.py", 87, "sync", True),
               Frame(USER_FILE, 61, "train_step", False), Frame(USER_FILE, 88, "<module>", False))
    sync = Sync(read=".item()", shape=[])

    def graph(length: int) -> Compile:
        return Compile(phase="graph", cause="step barrier: torch_xla.sync()",
                       cause_kind="barrier",
                       inputs=[GraphInput("f32", [8, length, 64], origin=Frame(USER_FILE, 52)),
                               GraphInput("f32", [64, 64])],
                       ops={"dot": 2, "add": 1}, digest=f"d{length}", num_inputs=2)

    slow = 2.0 if host == 37 else 1.0
    t_end = 0.0
    for i in range(steps):
        compiled = i == 0 or (host == 5 and i == steps // 2)
        compile_s = 0.5 if compiled else 0.0
        wall = 0.012 * slow + compile_s + (i % 7) * 1e-4
        t_end += wall
        writer.write_event("sync", i, seconds=0.0009, stack=read, payload=sync, value=1.0)
        if compiled:
            length = 128 if i == 0 else 160
            writer.write_event("compile", i, seconds=compile_s, stack=barrier,
                               payload=graph(length), key=f"g{length}")
        writer.write_event("execute", i, key="g160" if host == 5 and i >= steps // 2 else "g128")
        writer.write_step(i, {
            "wall_s": wall, "t_end_s": t_end,
            "compile_count": 1.0 if compiled else 0.0, "compile_s": compile_s,
            "execute_count": 1.0, "execute_s": 0.008,
            "to_device_count": 1.0, "to_device_bytes": 8 * 128 * 64 * 4.0, "to_device_s": 4e-4,
            "from_device_count": 1.0, "from_device_bytes": 4.0, "from_device_s": 9e-4,
            "fallback_count": 0.0,
        })
    writer.finish("ok")
    error = Uploader(spool).finish()
    if error is not None:
        raise SystemExit(f"host {host}: upload failed: {error}")
    spool.remove()
    return time.perf_counter() - t0


def timed_report(url: str, cache: Path, env: dict[str, str]) -> tuple[float, float, dict]:
    """``lazyscope report URL --format json`` in a fresh process: (wall s, its CPU s: the
    rest of the wall time is waiting on the storage server, the report)."""
    full = {**os.environ, **env, "XDG_CACHE_HOME": str(cache),
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lazyscope", "report", url, "--format", "json"],
                          cwd=REPO, env=full, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"report failed ({proc.returncode}): {proc.stderr}")
    return wall, cpu, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=4, help="hosts written at once")
    args = ap.parse_args()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    env, server = start_emulator()
    os.environ.update(env)
    base = Path(tempfile.mkdtemp(prefix="lazyscope-pod-scale-"))
    os.environ["XDG_CACHE_HOME"] = str(base / "writers")
    url = f"gs://{BUCKET}/pod-{os.getpid()}"
    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda h: write_host(url, h, args.steps), range(args.hosts)))
        written = time.perf_counter() - t0
        cold, cold_cpu, report = timed_report(url, base / "reader", env)
        warm, warm_cpu, _ = timed_report(url, base / "reader", env)
        hosts = report["hosts"]
        divergence = [f for f in report["findings"] if f["kind"] == "divergence"]
        print(f"{args.hosts} hosts x {args.steps:,} steps written through RunWriter and "
              f"uploaded in {written:.1f} s")
        print(f"report {url} --format json: cold {cold:.2f} s (every object downloaded; "
              f"the report process's CPU {cold_cpu:.2f} s, the rest waiting on the storage "
              f"server), warm {warm:.2f} s (cached by generation; CPU {warm_cpu:.2f} s)")
        print(f"hosts rows: {len(hosts)}, steps per host: {sorted({h['steps'] for h in hosts})}")
        for f in divergence:
            where = f"{f['file']}:{f['line']}" if f["file"] else "no line"
            print(f"  divergence: host {f['host']} {f['diverges']} at {where}: "
                  f"{f['detail'][:110]}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
