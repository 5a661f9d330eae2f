"""``lazyscope tensorboard``: serve a run's profile and scalars with TensorBoard.

``start_tensorboard(logdir, port, host=...)`` starts TensorBoard in a child process (on
127.0.0.1 unless told otherwise) and waits (bounded) until it answers; :func:`urls` gives the
links the command prints, which open the scalars with smoothing 0 (see
:mod:`lazyscope.render.tensorboard` for why)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import click

from lazyscope.analyze.report import Report
from lazyscope.commands.common import RUN, URLS, Whole, report_and_views
from lazyscope.core.errors import LazyscopeError
from lazyscope.render.tensorboard import (
    check_tensorboard,
    remove_scalars,
    tensorboard_dir,
    write_scalars,
)
from lazyscope.store.remote import PROFILE_DIR, host_dir_name

#: what a profile of XLA:CPU can and cannot show (docs/profiles.md says why)
PROFILE_ON_CPU = ("XLA:CPU: the overview's step time is host time; its device fields stay 0, "
                  "there is no device plane on a CPU")


def urls(host: str, port: int) -> dict[str, str]:
    """Where TensorBoard shows a run: the scalars with smoothing off (Time Series, and the
    legacy Scalars dashboard), the count table, the profile."""
    base = f"http://{host}:{port}"
    return {"scalars": f"{base}/?smoothing=0#timeseries",
            "scalars (legacy)": f"{base}/#scalars&_smoothingWeight=0",
            "counts": f"{base}/#text", "profile": f"{base}/#profile"}


#: XProf's streaming trace viewer, and how many hosts it loads at once
TRACE_TOOL = "trace_viewer@"
MAX_JOINT_HOSTS = 10
XPLANE = ".xplane.pb"


def joint_view(logdir: Path) -> tuple[str, list[str]] | None:
    """The XProf session that holds several hosts' captures (a pod's ``--profile``:
    ``plugins/profile/<session>/host<N>.xplane.pb``) and those hosts, as XProf names them
    (the file names); None when no session holds more than one."""
    try:
        sessions = sorted(p for p in (logdir / "plugins" / "profile").iterdir() if p.is_dir())
    except OSError:
        return None
    for session in sessions:
        hosts = sorted((p.name[:-len(XPLANE)] for p in session.glob("*" + XPLANE)),
                       key=lambda h: [int(t) if t.isdigit() else t
                                      for t in re.split(r"(\d+)", h)])
        if len(hosts) > 1:
            return session.name, hosts
    return None


def joint_view_url(host: str, port: int, session: str, hosts: list[str]) -> str:
    """XProf's trace viewer of ``session`` with ``hosts`` selected: their timelines one above
    the other (the first :data:`MAX_JOINT_HOSTS`: XProf loads no more at once)."""
    query = urllib.parse.urlencode({"run": session, "tool": TRACE_TOOL,
                                    "hosts": ",".join(hosts[:MAX_JOINT_HOSTS])})
    return f"http://{host}:{port}/?{query}#profile"


def write_all_scalars(report: Report, logdir: Path,
                      hosts: dict[int, Report] | None = None) -> None:
    """The scalars of a run into ``logdir``; of a pod (``hosts``: each host's own report),
    each host's into ``logdir/host<N>/``, a TensorBoard run per host beside the others (the
    pod's own report is host 0's: its series alone would hide the rest)."""
    if not hosts:
        write_scalars(report, logdir)
        return
    remove_scalars(logdir)
    for h, rep in sorted(hosts.items()):
        write_scalars(rep, logdir / host_dir_name(h))


def serving_dir(report: Report, run_dir: Path,
                hosts: dict[int, Report] | None = None) -> tuple[Path, Any]:
    """The log directory to serve and a cleanup function: ``RUN/tensorboard`` with fresh
    scalars (a pod's: one run per host, ``host<N>``), or, when the run cannot be written (a
    read-only mount), a temporary copy of its profile with the scalars written there (removed
    by the cleanup)."""
    logdir = tensorboard_dir(run_dir)
    try:
        write_all_scalars(report, logdir, hosts)
        return logdir, lambda: None
    except OSError:
        pass
    tmp = Path(tempfile.mkdtemp(prefix="lazyscope-tb-"))
    try:
        if logdir.is_dir():
            shutil.copytree(logdir, tmp / "tensorboard", dirs_exist_ok=True)
        write_all_scalars(report, tmp / "tensorboard", hosts)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise LazyscopeError(f"cannot prepare TensorBoard's log directory for {run_dir}: "
                             f"{err.strerror or err}") from None
    return tmp / "tensorboard", lambda: shutil.rmtree(tmp, ignore_errors=True)


def host_reports(run_dir: Path) -> dict[int, Report]:
    """Each host's own report of the pod at ``run_dir`` (its part as a run of its own)."""
    from lazyscope.analyze.ranks import build_any
    from lazyscope.model import PodRun
    from lazyscope.model.source_files import SOURCES
    from lazyscope.store import load_target

    pod = load_target(run_dir)
    if not isinstance(pod, PodRun):
        return {}
    return {h: build_any(part, sources=SOURCES) for h, part in sorted(pod.hosts.items())}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_tensorboard(logdir: Path, port: int, *, host: str = "127.0.0.1",
                      timeout: float = 90.0) -> subprocess.Popen[bytes]:
    """Start TensorBoard (with every installed plugin, the profile plugin included) on
    ``host``:``port`` for ``logdir``; return the process once it answers HTTP.

    Raises LazyscopeError when it exits or does not answer within ``timeout`` seconds.
    """
    check_tensorboard()
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
           "--host", host, "--port", str(port), "--reload_interval", "5"]
    log = tempfile.TemporaryFile()  # a file, not a pipe: a long-running server never blocks
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    # a server bound to every interface answers on the loopback too
    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    url = f"http://{local}:{port}/data/plugins_listing"
    import urllib.error  # only here: every command imports this module, few serve
    import urllib.request

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace").strip()
                last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
                raise LazyscopeError(f"TensorBoard did not start on {host}:{port}: {last}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return proc
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
    except BaseException:
        # Ctrl-C or `kill` (SystemExit from the caller's handler) while starting: no orphan
        stop_tensorboard(proc)
        raise
    stop_tensorboard(proc)
    raise LazyscopeError(f"TensorBoard did not answer on {host}:{port} within {timeout:.0f} s")


def stop_tensorboard(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started by :func:`start_tensorboard`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()



def has_profile(logdir: Path) -> bool:
    """True when ``logdir`` holds an XProf capture (``plugins/profile/<session>/*.xplane.pb``:
    a run traced with ``--profile``)."""
    return any((logdir / PROFILE_DIR).glob("*/*" + XPLANE))


def _profiled_on_cpu(report: Any) -> bool:
    profile = report.profile or {}
    return bool(profile.get("captured_steps")) and "CPU" in (report.summary.device or "")


@click.command("tensorboard")
@click.argument("run_dir", type=RUN)
@click.option("--port", type=Whole(0, 65535), default=6006, show_default=True,
              help="port to serve on (0: any free port)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to bind: 0.0.0.0 serves every interface (a TPU VM you reach "
              "without an ssh tunnel); the default is reachable through `ssh -L`")
def tensorboard_cmd(run_dir: Path, port: int, host: str) -> None:
    """Serve a run's profile and scalars with TensorBoard until Ctrl-C.

    \b
    On a remote machine (a TPU VM), forward the port from your own machine:
      ssh -L 6006:127.0.0.1:6006 VM      then open http://127.0.0.1:6006/
    A run on a read-only file system is served from a temporary copy of its log directory."""
    import signal


    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)

    check_tensorboard()
    report = report_and_views(run_dir, views=False)
    hosts = host_reports(run_dir) if report.hosts is not None else None
    # `kill PID` stops TensorBoard and removes a temporary copy, from here on (start-up too)
    signal.signal(signal.SIGTERM, _terminate)
    logdir, cleanup = serving_dir(report, run_dir, hosts)
    port = port or free_port()
    try:
        proc = start_tensorboard(logdir, port, host=host)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        links = urls(shown, port)
        name = URLS.get(run_dir, run_dir)  # a run at a URL: the URL, not its local copy
        click.echo(f"TensorBoard for {name}: http://{shown}:{port}/ (Ctrl-C to stop)")
        click.echo(f"  scalars, unsmoothed: {links['scalars']}  (legacy dashboard: "
                   f"{links['scalars (legacy)']})")
        click.echo(f"  counts per step:     {links['counts']}")
        if hosts:
            click.echo(f"  hosts:               {', '.join(map(host_dir_name, hosts))} (a "
                       "TensorBoard run each: their scalars side by side)")
        if has_profile(logdir):
            click.echo(f"  profile:             {links['profile']}"
                       + (f"  ({PROFILE_ON_CPU})" if _profiled_on_cpu(report) else ""))
        else:
            click.echo("  profile:             none captured (`lazyscope trace --profile` "
                       "captures one)")
        joint = joint_view(logdir)
        if joint is not None:
            session, hosts = joint
            more = (f" (the first {MAX_JOINT_HOSTS} of {len(hosts)}: XProf loads "
                    f"{MAX_JOINT_HOSTS} at most; pick others in its Hosts list)"
                    if len(hosts) > MAX_JOINT_HOSTS else "")
            click.echo(f"  every host, one timeline: "
                       f"{joint_view_url(shown, port, session, hosts)}{more}")
        try:
            proc.wait()
        finally:
            stop_tensorboard(proc)
    finally:
        cleanup()
