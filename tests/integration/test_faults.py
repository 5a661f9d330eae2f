"""Fault injection: what lazyscope does when its output cannot be written, when the disk fills,
when paths are odd, when the program is unusual. Every case runs the real CLI (in a subprocess,
or in-process through ``lazyscope.cli.main`` where nothing needs a process of its own) and checks

* the exit code (README's table),
* stderr: ``lazyscope: <one line>``, never a Python traceback; exactly one line unless the
  case lets the program's own output come first,
* nothing lost: a run that had recorded steps before the fault still loads
  (``lazyscope report RUN --format json`` works and shows them).

Faults that need privileges: permission cases run the CLI as an unprivileged user (``setpriv
--reuid=nobody`` when the tests run as root), read-only and full file systems are small tmpfs
mounts (root only); each such case is skipped with the reason when that is not possible here.

With ``LAZYSCOPE_FAULT_TABLE=path`` the module writes a markdown table of what each
case did (exit code, first stderr line, steps kept) there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lazyscope.model import STEP_FIELDS
from lazyscope.store.records import EVENT_RECORD, STEP_RECORD
from tests.conftest import REPO, lazyscope_cmd

pytestmark = pytest.mark.xla

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
#: what the cases' processes import: this checkout first, then what PYTHONPATH already had (a
#: checkout's scenarios reached through it, as tests.conftest.lazyscope_cmd does: never
#: another checkout's installed scenarios beside this lazyscope)
CHECKOUT_PATH = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

# --------------------------------------------------------------------------- programs

LOOP = """\
import sys
import torch
import torch_xla

# accepts and ignores any arguments
dev = torch_xla.device()
w = torch.zeros(4, 4, device=dev)
for _ in range(6):
    w = w + 1
    torch_xla.sync()
"""

# fills the file system holding LS_FILLER after its 3rd step, then keeps stepping: the run's
# preallocated steps.bin (64 KiB, 546 records) runs out after a few hundred more steps
FILL = """\
import os
import torch
import torch_xla

filler = os.environ["LS_FILLER"]
dev = torch_xla.device()
w = torch.zeros(4, 4, device=dev)
for i in range(int(os.environ.get("LS_STEPS", "600"))):
    w = w + 1
    torch_xla.sync()
    if i == 2:
        try:
            with open(filler, "wb") as fh:
                while True:
                    fh.write(b"0" * (1 << 16))
        except OSError:
            pass
"""

# the main thread reaches a barrier first (5 barriers); a worker thread makes 3 more. torch_xla
# needs one thread at a time building and syncing a graph (without the lock this program fails
# untraced too: "Check failed: tensor_data")
THREAD_BOTH = """\
import threading
import torch
import torch_xla

dev = torch_xla.device()
lock = threading.Lock()

def worker():
    with lock:  # torch_xla's sync takes every live tensor: none made while another syncs
        x = torch.zeros(3, device=dev)
    for _ in range(3):
        with lock:
            x = x + 1
            torch_xla.sync()

w = torch.zeros(4, 4, device=dev)
with lock:
    w = w + 1
    torch_xla.sync()
t = threading.Thread(target=worker)
t.start()
for _ in range(4):
    with lock:
        w = w + 1
        torch_xla.sync()
t.join()
"""

THREAD_ONLY = """\
import threading
import torch
import torch_xla

def worker():
    dev = torch_xla.device()
    x = torch.zeros(3, device=dev)
    for _ in range(4):
        x = x + 1
        torch_xla.sync()

t = threading.Thread(target=worker)
t.start()
t.join()
"""

SCRIPTS = {"loop.py": LOOP, "fill.py": FILL, "thread_both.py": THREAD_BOTH,
           "thread_only.py": THREAD_ONLY, "broken.py": "for i in range(3)\n    pass\n"}

# --------------------------------------------------------------------------- environment


def _rmtree(path: Path) -> None:
    """Remove a tree whose directories a case made read-only."""

    def fix(func, p, _exc):  # noqa: ANN001
        try:
            os.chmod(os.path.dirname(p), 0o755)
            os.chmod(p, 0o755)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """Mount a tmpfs at ``path``; None, or why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                           str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"mount -t tmpfs is not allowed here: {proc.stderr.strip()}"
    return None


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def make_run(path: Path, n: int = 5) -> Path:
    """A small finished XLA-shaped run (every step field measured), written by RunWriter."""
    from lazyscope.model import STEP_FIELDS
    from tests.builders import build_run

    steps = [{f: 0.0 for f in STEP_FIELDS} | {"wall_s": 0.01, "t_end_s": 0.01 * (i + 1),
                                               "execute_count": 1.0} for i in range(n)]
    build_run(path, steps=steps)
    return path


@dataclass
class Env:
    base: Path
    paths: dict[str, str]
    #: why a kind of fault cannot be made here ("nobody", "ro", "full", "fill", "tensorboard")
    unavailable: dict[str, str]
    mounts: list[Path] = field(default_factory=list)

    def subprocess_env(self, user: str) -> dict[str, str]:
        env = {"PYTHONPATH": CHECKOUT_PATH}
        if user == "nobody":
            env["HOME"] = env["MPLCONFIGDIR"] = str(self.base / "home")
        return env


def _probe_nobody(base: Path) -> str | None:
    if os.geteuid() != 0:
        return None  # the tests run unprivileged already: chmod 555 binds this user
    if shutil.which("setpriv") is None:
        return "setpriv is not installed (needed to drop root for the permission cases)"
    code = f"import lazyscope.cli, torch_xla; open({str(base / 'scripts' / 'loop.py')!r}).read()"
    proc = subprocess.run([*NOBODY, sys.executable, "-c", code],
                          cwd=base, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(base / "home")})
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return (f"user nobody cannot run {sys.executable} with lazyscope and torch_xla, or "
                f"read {base}: {last}")
    return None


@pytest.fixture(scope="module")
def env():
    base = Path(tempfile.mkdtemp(prefix="lazyscope-faults-"))
    base.chmod(0o755)  # user nobody traverses it
    scripts = base / "scripts"
    scripts.mkdir()
    for name, text in SCRIPTS.items():
        (scripts / name).write_text(text)
    home = base / "home"
    home.mkdir()
    if os.geteuid() == 0:
        shutil.chown(home, "nobody")
    unavailable: dict[str, str] = {}
    why = _probe_nobody(base)
    if why:
        unavailable["nobody"] = why
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        unavailable["tensorboard"] = "tensorboard is not installed"
    e = Env(base, {"s": str(scripts), "repo": str(REPO)}, unavailable)
    # a read-only mount holding a run and an empty directory
    ro = base / "ro"
    why = _mount_tmpfs(ro, "8m")
    if why is None:
        e.mounts.append(ro)
        make_run(ro / "run")
        (ro / "empty").mkdir()
        proc = subprocess.run(["mount", "-o", "remount,ro", str(ro)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            why = f"mount -o remount,ro is not allowed here: {proc.stderr.strip()}"
    if why:
        unavailable["ro"] = why
    # a full file system
    full = base / "full"
    why = _mount_tmpfs(full, "2m")
    if why is None:
        e.mounts.append(full)
        try:
            with open(full / "filler", "wb") as fh:
                while True:
                    fh.write(b"\0" * (1 << 16))
        except OSError:
            pass
    else:
        unavailable["full"] = why
    # room for a few MiB: the program fills it mid-run
    fill = base / "fill"
    why = _mount_tmpfs(fill, "4m")
    if why is None:
        e.mounts.append(fill)
        fill.chmod(0o777)
    else:
        unavailable["fill"] = why
    # room for the first files of a comparison, not for its first policy's run (issue 50)
    tiny = base / "tiny"
    why = _mount_tmpfs(tiny, "44k")
    if why is None:
        e.mounts.append(tiny)
    else:
        unavailable["tiny"] = why
    if os.geteuid() != 0:
        unavailable["mknod"] = "making a device node needs root"
    e.paths.update(ro=str(ro), full=str(full), fill=str(fill), tiny=str(tiny))
    try:
        yield e
    finally:
        for m in e.mounts:
            _umount(m)
        _rmtree(base)


# --------------------------------------------------------------------------- cases


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str


@dataclass
class Ctx:
    env: Env
    d: Path  # this case's own directory
    case: Case

    def fmt(self, text: str) -> str:
        return text.format(d=self.d, **self.env.paths)

    def pattern(self, regex: str) -> str:
        return regex.format(d=re.escape(str(self.d)),
                            **{k: re.escape(v) for k, v in self.env.paths.items()})


@dataclass
class Case:
    name: str
    argv: list[str]  # templates: {d} the case's dir, {s} the scripts, {ro} {full} {fill} mounts
    exit: int | tuple[int, ...]
    #: regex (templated, paths escaped) the first stderr line must match; None: stderr is empty
    stderr: str | None
    run: str | None = None  # a run that must still load afterwards ...
    kept: int | None = None  # ... with at least (kept_exact: exactly) this many steps
    kept_exact: bool = False
    setup: Callable[[Ctx], None] | None = None
    after: Callable[[Ctx], None] | None = None  # before the "kept" check (free the disk ...)
    extra: Callable[[Ctx, Result], list[str]] | None = None  # more checks: problems found
    user: str = "root"  # "nobody": an unprivileged user
    needs: tuple[str, ...] = ()
    cwd: str | None = None
    inproc: bool = False  # lazyscope.cli.main in this process (capsys)
    subenv: dict[str, str] | None = None  # templated, added to the subprocess' environment
    runner: Callable[[Ctx], Result] | None = None
    program_output: bool = False  # lines of the program's own may precede lazyscope's
    #: cases with the same name share one directory, one setup and (same argv and runner) one
    #: run: several cases read their facts from one traced program
    shared: str | None = None
    allow_empty_stderr: bool = False  # with an exit tuple: an exit that says nothing is fine
    #: may run in the look-ahead thread (False: the runner calls lazyscope in this process)
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.user == "nobody":
            self.needs = (*self.needs, "nobody")


def _mkdirs(*names: str, mode: int = 0o755, owner: str | None = None):
    def setup(ctx: Ctx) -> None:
        for name in names:
            p = ctx.d / name
            p.mkdir(parents=True, exist_ok=True)
            if owner and os.geteuid() == 0:
                shutil.chown(p, owner)
            p.chmod(mode)
    return setup


def _chain(*fns: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    def run(ctx: Ctx) -> None:
        for fn in fns:
            fn(ctx)
    return run


def _readonly_run(ctx: Ctx) -> None:
    """A read-only run in a directory its user may write (the parent is not the problem)."""
    run = make_run(ctx.d / "rorun")
    if os.geteuid() == 0:
        shutil.chown(ctx.d, "nobody")
    for p in [run, *run.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)


def _run_in_locked_parent(ctx: Ctx) -> None:
    lp = ctx.d / "lp"
    lp.mkdir()
    run = make_run(lp / "run")
    if os.geteuid() == 0:
        for p in [run, *run.rglob("*")]:
            shutil.chown(p, "nobody")
    lp.chmod(0o555)


def _symlinks(ctx: Ctx) -> None:
    (ctx.d / "dangling").symlink_to(ctx.d / "nowhere")
    (ctx.d / "loopa").symlink_to("loopb")
    (ctx.d / "loopb").symlink_to("loopa")
    make_run(ctx.d / "target")
    (ctx.d / "torun").symlink_to(ctx.d / "target")


FOREIGN = {"meta.json": '{"name": "my thing", "version": 7}\n', "keep.txt": "precious\n"}


def _foreign(name: str, meta: str | None = None):
    def setup(ctx: Ctx) -> None:
        p = ctx.d / name
        p.mkdir()
        for f, text in FOREIGN.items():
            (p / f).write_text(text if meta is None or f != "meta.json" else meta)
    return setup


def _foreign_intact(name: str, meta: str | None = None):
    def check(ctx: Ctx, res: Result) -> list[str]:
        p = ctx.d / name
        want = {f: (t if meta is None or f != "meta.json" else meta) for f, t in FOREIGN.items()}
        if not p.is_dir():
            return [f"the foreign directory {p} is gone"]
        have = sorted(f.name for f in p.iterdir())
        if have != sorted(want) or any((p / f).read_text(errors="replace") != t
                                       for f, t in want.items()):
            return [f"the foreign directory {p} was replaced: it now holds {have}"]
        return []
    return check


def _old_report_not_shown(ctx: Ctx, res: Result) -> list[str]:
    if "lazyscope report:" in res.stdout:
        return ["stdout shows the report of the old run, which this trace never recorded"]
    return []


def _make_runs(*names: str):
    def setup(ctx: Ctx) -> None:
        for n in names:
            make_run(ctx.d / n)
    return setup


def _corrupt_meta(ctx: Ctx) -> None:
    make_run(ctx.d / "run")
    (ctx.d / "run" / "meta.json").write_text('{"schema_version": 2, "target": ')


def _truncate_steps(ctx: Ctx) -> None:
    make_run(ctx.d / "run", 5)
    steps = ctx.d / "run" / "steps.bin"
    os.truncate(steps, 4 * STEP_RECORD.size + STEP_RECORD.size // 2)  # 4 whole and half the 5th


def _newer_schema(ctx: Ctx) -> None:
    make_run(ctx.d / "run")
    meta = ctx.d / "run" / "meta.json"
    data = json.loads(meta.read_text())
    data["schema_version"] = 99
    meta.write_text(json.dumps(data))


def _warns_cut(ctx: Ctx, res: Result) -> list[str]:
    if "steps.bin: the last record was cut off" not in res.stdout:
        return ["the report does not warn that steps.bin's last record was cut off"]
    return []


def _hide_xla(ctx: Ctx) -> None:
    (ctx.d / "site").mkdir()
    (ctx.d / "site" / "sitecustomize.py").write_text(
        'import sys\nsys.modules["torch_xla"] = None\n')


def _broken_xla(ctx: Ctx) -> None:
    pkg = ctx.d / "fake" / "torch_xla"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('raise ImportError("libtpu.so: cannot open shared object '
                                     'file (simulated broken install)")\n')


def _free_filler(ctx: Ctx) -> None:
    (Path(ctx.env.paths["fill"]) / "filler").unlink(missing_ok=True)


def _no_space_run(ctx: Ctx, res: Result) -> list[str]:
    problems = []
    run = Path(ctx.env.paths["fill"]) / "run"
    try:
        meta = json.loads((run / "meta.json").read_text())
    except (OSError, ValueError) as err:
        return [f"cannot read {run}/meta.json: {err}"]
    if meta.get("status") != "no_space":
        problems.append(f"meta.json status is {meta.get('status')!r}, not 'no_space'")
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("lazyscope: ") and " failed" in ln]
    if said or res.rc == 5:
        problems.append(f"it says the program failed (exit {res.rc}): {said[:1]}")
    m = re.search(r"no space left on .* while writing .*; (\d+) steps kept", res.stderr)
    if m:
        shown = _report_steps(run)
        if isinstance(shown, int) and shown != int(m.group(1)):
            problems.append(f"stderr says {m.group(1)} steps kept, the run has {shown}")
    return problems


def _no_thread_exception(ctx: Ctx, res: Result) -> list[str]:
    return ["a thread raised: " + res.stderr[-300:]] if "Exception in thread" in res.stderr else []


def _dollar_reports(ctx: Ctx, res: Result) -> list[str]:
    problems = []
    run = ctx.d / "run"
    for fmt in ("text", "json", "html"):
        proc = lazyscope_cmd("report", str(run), "--format", fmt)
        if proc.returncode != 0 or proc.stderr.strip():
            problems.append(f"report --format {fmt}: exit {proc.returncode}, "
                            f"stderr {proc.stderr.strip()[-300:]!r}")
    if "$\\foo$" not in json.loads((run / "meta.json").read_text()).get("args", []):
        problems.append("meta.json does not keep the argument $\\foo$ as given")
    return problems


def _served_location(port: int) -> str:
    """The log directory the TensorBoard on ``port`` serves (OSError: nothing answers)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/environment", timeout=2) as resp:
        return str(json.loads(resp.read()).get("data_location", ""))


def _tensorboard(ctx: Ctx) -> Result:
    """Start `lazyscope tensorboard RUN --port 0`, wait for it to serve, SIGTERM it."""
    import selectors

    run = ctx.fmt("{ro}/run")
    proc = subprocess.Popen([sys.executable, "-m", "lazyscope", "tensorboard", run, "--port", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO)})
    out, port, served, ours = b"", None, False, None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
    deadline = time.monotonic() + 90
    try:
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            if sel.select(timeout=0.5):
                out += os.read(proc.stdout.fileno(), 4096)  # type: ignore[union-attr]
                m = re.search(rb"http://127\.0\.0\.1:(\d+)/", out)
                port = int(m.group(1)) if m else None
        while port is not None and time.monotonic() < deadline and not served:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
                    served = resp.status == 200
                ours = _served_location(port)
            except OSError:
                time.sleep(0.5)
    finally:
        sel.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rest, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, err = proc.communicate()
    stdout = (out + rest).decode(errors="replace")
    stderr = err.decode(errors="replace")
    if not served:
        stderr += f"\n[test] TensorBoard never answered on port {port}"
    elif port is not None:
        try:  # stopped with lazyscope: nothing left serving its log directory
            if _served_location(port) == ours:  # (another test's server may take the port)
                stderr += (f"\n[test] TensorBoard still serves {ours} on port {port} after "
                           "lazyscope exited")
        except OSError:
            pass
    return Result(proc.returncode, stdout, stderr)


def trace_loop(*options: str) -> list[str]:
    """``lazyscope trace OPTIONS {s}/loop.py``: lazyscope's options go before the script."""
    return ["trace", *options, "{s}/loop.py"]


CASES: list[Case] = [
    # -- permissions (an unprivileged user) -------------------------------------------------
    Case("out-in-locked-dir", trace_loop("--out", "{d}/locked/run"), 3,
         r"lazyscope: cannot write {d}/locked/run: permission denied$",
         user="nobody", setup=_mkdirs("locked", mode=0o555)),
    Case("out-deep-in-locked-dir", trace_loop("--out", "{d}/locked/a/b/run"), 3,
         r"lazyscope: cannot write {d}/locked/a: permission denied$",
         user="nobody", setup=_mkdirs("locked", mode=0o555)),
    Case("out-is-locked-empty-dir", trace_loop("--out", "{d}/locked"), 3,
         r"lazyscope: cannot write {d}/locked\S*: permission denied$",
         user="nobody", setup=_mkdirs("locked", mode=0o555)),
    Case("out-is-locked-empty-dir-force", trace_loop("--out", "{d}/locked", "--force"), 3,
         r"lazyscope: cannot write {d}/locked\S*: permission denied$",
         user="nobody", setup=_mkdirs("locked", mode=0o555)),
    Case("force-readonly-run", trace_loop("--out", "{d}/rorun", "--force"), 3,
         r"lazyscope: cannot replace {d}/rorun: permission denied; the old run is left as it was$",
         run="{d}/rorun", kept=5, user="nobody", setup=_readonly_run,
         extra=_old_report_not_shown),
    Case("force-run-in-locked-parent", trace_loop("--out", "{d}/lp/run", "--force"), 3,
         r"lazyscope: cannot replace {d}/lp/run: permission denied \({d}/lp\); the old run is left "
         r"as it was$",
         run="{d}/lp/run", kept=5, user="nobody", setup=_run_in_locked_parent),
    # -- a read-only file system -------------------------------------------------------------
    Case("out-on-ro-mount", trace_loop("--out", "{ro}/new"), 3,
         r"lazyscope: cannot write {ro}/new: read-only file system$", needs=("ro",)),
    Case("out-is-empty-dir-on-ro-mount", trace_loop("--out", "{ro}/empty"), 3,
         r"lazyscope: cannot write {ro}/empty\S*: read-only file system$", needs=("ro",)),
    Case("run-on-ro-mount-no-force", trace_loop("--out", "{ro}/run"), 3,
         r"lazyscope: {ro}/run already exists; pass --force to replace it$",
         run="{ro}/run", kept=5, needs=("ro",)),
    Case("force-run-on-ro-mount", trace_loop("--out", "{ro}/run", "--force"), 3,
         r"lazyscope: cannot replace {ro}/run: read-only file system; the old run is left as it "
         r"was$",
         run="{ro}/run", kept=5, needs=("ro",), extra=_old_report_not_shown),
    Case("report-html-on-ro-mount", ["report", "{ro}/run", "--format", "html"], 3,
         r"lazyscope: cannot write {ro}/run/\S*: read-only file system$",
         run="{ro}/run", kept=5, needs=("ro",)),
    Case("tensorboard-on-ro-mount", ["tensorboard", "{ro}/run", "--port", "0"], 0, None,
         run="{ro}/run", kept=5, needs=("ro", "tensorboard"), runner=_tensorboard),
    # -- symbolic links ----------------------------------------------------------------------
    Case("out-dangling-symlink", trace_loop("--out", "{d}/dangling"), 3,
         r"lazyscope: {d}/dangling is a symbolic link", setup=_symlinks),
    Case("out-under-dangling-symlink", trace_loop("--out", "{d}/dangling/run"), 3,
         r"lazyscope: .*{d}/dangling\b", setup=_symlinks),
    Case("out-symlink-loop", trace_loop("--out", "{d}/loopa"), 3,
         r"lazyscope: {d}/loopa is a symbolic link", setup=_symlinks),
    Case("out-symlink-loop-force", trace_loop("--out", "{d}/loopa", "--force"), 3,
         r"lazyscope: {d}/loopa is a symbolic link", setup=_symlinks),
    Case("out-under-symlink-loop", trace_loop("--out", "{d}/loopa/run"), 3,
         r"lazyscope: cannot write {d}/loopa/run: too many levels of symbolic links$",
         setup=_symlinks),
    Case("out-symlink-to-run-force", trace_loop("--out", "{d}/torun", "--force"), 3,
         r"lazyscope: {d}/torun is a symbolic link \(to {d}/target\)",
         run="{d}/target", kept=5, setup=_symlinks),
    # -- the current directory, a directory that is not a run --------------------------------
    Case("out-empty-force-foreign-cwd", trace_loop("--out", "", "--force"), (2, 3),
         r"lazyscope: the output directory must be a new directory", cwd="{d}/mine",
         setup=_foreign("mine"), extra=_foreign_intact("mine")),
    Case("out-dot-force-foreign-cwd", trace_loop("--out", ".", "--force"), (2, 3),
         r"lazyscope: the output directory must be a new directory", cwd="{d}/mine",
         setup=_foreign("mine"), extra=_foreign_intact("mine")),
    Case("force-foreign-meta", trace_loop("--out", "{d}/mine", "--force", "--steps", "1"), 3,
         r"lazyscope: {d}/mine is not empty and is not a lazyscope run",
         setup=_foreign("mine", meta="this is not json\n"),
         extra=_foreign_intact("mine", meta="this is not json\n")),
    Case("force-foreign-meta-cwd-abs", trace_loop("--out", "{d}/mine", "--force", "--steps", "1"), 3,
         r"lazyscope: {d}/mine is not empty and is not a lazyscope run", cwd="{d}/mine",
         setup=_foreign("mine"), extra=_foreign_intact("mine")),
    # -- a full disk -------------------------------------------------------------------------
    Case("trace-on-full-disk", trace_loop("--out", "{full}/run"), 3,
         r"lazyscope: no space left on {full} while writing {full}/run$", needs=("full",)),
    Case("trace-on-full-disk-leaves-nothing", trace_loop("--out", "{full}/left"), 3,
         r"lazyscope: no space left on {full} while writing {full}/left$", needs=("full",),
         extra=lambda ctx, res: [f"{ctx.fmt('{full}/left')} was left behind"]
         if os.path.lexists(ctx.fmt("{full}/left")) else []),
    Case("compare-on-full-disk", ["compare", "--policies", "max", "--steps", "4", "--preset",
                                  "tiny", "--backends", "eager", "--out", "{full}/c",
                                  "decoder"], 3,
         r"lazyscope: eager/max: no space left on {full} while writing {full}/c/eager/max$",
         needs=("full",)),
    Case("disk-fills-mid-run", ["trace", "--out", "{fill}/run", "{s}/fill.py"], 3,
         r"lazyscope: no space left on {fill} while writing {fill}/run; \d+ steps kept$",
         run="{fill}/run", kept=3, needs=("fill",), subenv={"LS_FILLER": "{fill}/filler"},
         after=_free_filler, extra=_no_space_run),
    # -- unusual programs --------------------------------------------------------------------
    Case("dollar-argument", ["trace", "--out", "{d}/run", "{s}/loop.py", "--name", "$\\foo$"], 0, None,
         run="{d}/run", kept=6, kept_exact=True, extra=_dollar_reports),
    Case("thread-syncs-too", ["trace", "--out", "{d}/run", "{s}/thread_both.py"], 0, None,
         run="{d}/run", kept=5, kept_exact=True, extra=_no_thread_exception),
    Case("only-a-thread-syncs", ["trace", "--out", "{d}/run", "{s}/thread_only.py"], 0, None,
         run="{d}/run", kept=4, kept_exact=True, extra=_no_thread_exception),
    # -- the classic ones ----------------------------------------------------------------------
    Case("unknown-scenario", ["trace", "no-such-scenario"], 2,
         r"lazyscope: unknown scenario 'no-such-scenario'; scenarios: ", inproc=True),
    Case("bad-option-value", trace_loop("--steps", "0"), 2,
         r"lazyscope: Invalid value for '--steps'", inproc=True),
    Case("bad-format", ["report", "{d}/run", "--format", "pdf"], 2,
         r"lazyscope: Invalid value for '--format'", inproc=True, setup=_make_runs("run")),
    Case("missing-script", ["trace", "{d}/nothere.py"], 2,
         r"lazyscope: script {d}/nothere\.py does not exist$", inproc=True),
    Case("script-does-not-parse", ["trace", "{s}/broken.py"], 2,
         r"lazyscope: script {s}/broken\.py does not parse: line 1", inproc=True),
    Case("corrupt-meta", ["report", "{d}/run"], 3,
         r"lazyscope: {d}/run/meta\.json is not valid JSON", inproc=True, setup=_corrupt_meta),
    Case("truncated-steps", ["report", "{d}/run"], 0, None, run="{d}/run", kept=4,
         kept_exact=True, inproc=True, setup=_truncate_steps, extra=_warns_cut),
    Case("newer-schema", ["report", "{d}/run"], 3,
         r"lazyscope: {d}/run was written with run schema 99, newer than this lazyscope",
         inproc=True, setup=_newer_schema),
    Case("not-a-run", ["report", "{d}"], 3,
         r"lazyscope: {d} is not a lazyscope run: it has no meta\.json$", inproc=True),
    Case("missing-torch-xla", trace_loop("--out", "{d}/run"), 4,
         r"lazyscope: torch_xla is not installed: ", setup=_hide_xla,
         subenv={"PYTHONPATH": "{d}/site" + os.pathsep + "{repo}"},
         extra=lambda ctx, res: [] if not (ctx.d / "run").exists() else ["a run dir was made"]),
    Case("broken-torch-xla", trace_loop("--out", "{d}/run"), 4,
         r"lazyscope: torch_xla .*ImportError", setup=_broken_xla,
         subenv={"PYTHONPATH": "{d}/fake" + os.pathsep + "{repo}"}),
]

# --------------------------------------------------------------------------- round 3 (issue 24)
# Programs that fork, change directory, close their streams or get signalled; runs replaced
# while written; misuse of the Python API; run files that cannot be true. The mechanisms are
# backend-independent where they live in the runner, the store and the CLI: those cases trace a
# small program on ``--backend eager`` (CPU, a few seconds less than XLA's start-up each); the
# cases about XLA itself (fork, child processes, the debug file, the API) run on XLA:CPU.
# Cases that share one traced program (``shared=``) read their facts from one run of it.

EAGER = ["--backend", "eager", "--device", "cpu"]
#: what a trace leaves in the environment of a process, and what a launcher sets
_TRACE_ENV = ("PT_XLA_DEBUG_FILE", "PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_MAX_FRAME", "XLA_FLAGS",
              "LAZYSCOPE_XLA_DUMP_DIR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def prog(*, steps: int = 5, sleep: float = 0.0, pre: str = "", presync: str = "",
         hook: str = "", post: str = "", backend: str = "xla") -> str:
    """A small program: ``steps`` step barriers (``torch_xla.sync()`` on XLA,
    ``lazyscope.barrier()`` on ``--backend eager``); ``presync`` and ``hook`` run in the loop
    before and after the barrier (``i`` is the step), ``pre`` before it, ``post`` after it."""
    def ind(text, n):
        return ("\n".join(" " * n + ln for ln in text.strip("\n").splitlines())
               if text.strip() else "")
    if backend == "xla":
        head, dev, barrier = "import torch_xla", "dev = torch_xla.device()", "torch_xla.sync()"
    else:
        head, dev, barrier = "import lazyscope", "dev = 'cpu'", "lazyscope.barrier()"
    return "\n".join([
        "import os, sys, time", "import torch", head, ind(pre, 0), dev,
        "w = torch.zeros(4, 4, device=dev)", f"for i in range({steps}):", "    w = w + 1",
        ind(presync, 4), f"    {barrier}", ind(hook, 4), f"    time.sleep({sleep})",
        ind(post, 0), ""])


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _TRACE_ENV}
    return {**env, "PJRT_DEVICE": "CPU", "PYTHONPATH": CHECKOUT_PATH, **(extra or {})}


def _default_signals() -> None:
    """In the child: the dispositions of an interactive terminal (an ignored signal stays
    ignored across exec, and the harness may run with some ignored)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


def _start(argv: list[str], cwd: Path, *, env: dict[str, str] | None = None,
           stdout: Any = subprocess.PIPE, python: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, *([] if python else ["-m", "lazyscope"]), *argv]
    return subprocess.Popen(cmd, cwd=cwd, env=_clean_env(env), stdout=stdout,
                            stderr=subprocess.PIPE, preexec_fn=_default_signals)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> Result:
    """The process's result; killed by signal N it exits 128 + N, as a shell says."""
    out, err = proc.communicate(timeout=timeout)
    def text(b):
        return (b.decode("utf-8", "backslashreplace") if isinstance(b, bytes) else b or "")
    rc = proc.returncode
    return Result(rc if rc >= 0 else 128 - rc, text(out), text(err))


def _run(argv: list[str], cwd: Path, *, env: dict[str, str] | None = None,
         stdout: Any = subprocess.PIPE, python: bool = False, timeout: float = 300) -> Result:
    return _finish(_start(argv, cwd, env=env, stdout=stdout, python=python), timeout)


def _nsteps(run: Path) -> int:
    """Step records in RUN/steps.bin, read raw (a run being written)."""
    try:
        raw = (run / "steps.bin").read_bytes()
    except OSError:
        return 0
    size = STEP_RECORD.size
    return sum(1 for k in range(0, len(raw) - size + 1, size) if raw[k] == 1)


def _wait(cond: Callable[[], bool], proc: subprocess.Popen | None = None,
          timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            raise AssertionError("the condition never held" if proc is None or proc.poll() is
                                 None else f"the process ended first: {_finish(proc)}")
        time.sleep(0.1)


def _meta(run: Path) -> dict[str, Any]:
    try:
        data = json.loads((run / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(ctx: Ctx, name: str, text: str) -> Path:
    path = ctx.d / name
    path.write_text(text)
    return path


def _inproc(argv: list[str]) -> Result:
    """``lazyscope.cli.main(argv)`` in this process, its stdout and stderr captured."""
    import io

    from lazyscope.cli import main

    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err = io.StringIO(), io.StringIO()
    try:
        rc = main(argv)
    finally:
        sys.stdout, sys.stderr = saved
    return Result(rc, out.getvalue(), err.getvalue())


def _checks(*fns: Callable[[Ctx, Result], list[str]]) -> Callable[[Ctx, Result], list[str]]:
    def run(ctx: Ctx, res: Result) -> list[str]:
        return [p for fn in fns for p in fn(ctx, res)]
    return run


def _status(run: str, want: str) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        have = _meta(Path(ctx.fmt(run))).get("status")
        return [] if have == want else [f"{run}: status {have!r}, expected {want!r}"]
    return check


def _says(text: str, where: str = "stdout", count: int | None = None
          ) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        seen = (res.stdout if where == "stdout" else res.stderr).count(ctx.fmt(text))
        if (count is None and seen) or seen == count:
            return []
        return [f"{where} has {text!r} {seen} time(s), expected {count or 'at least 1'}"]
    return check


# -- a run directory owned by one live trace (G1) -----------------------------------------


def _force_while_running(ctx: Ctx) -> Result:
    """a.py is traced into R; while it runs, b.py --force into R, c.py without --force, and
    `report R` read the live run."""
    # a.py steps until the test lets it end (whatever the load, it is live meanwhile)
    _write(ctx, "a.py", prog(steps=3000, sleep=0.02, backend="eager", hook="""\
if os.path.exists("stop"):
    break""", post='print("a steps", i + 1, flush=True)'))
    _write(ctx, "b.py", prog(steps=3, backend="eager"))
    a = _start(["trace", "--out", "R", "--no-views", *EAGER, "a.py"], ctx.d)
    _wait(lambda: _nsteps(ctx.d / "R") >= 3, a)
    b = _run(["trace", "--out", "R", "--force", "--no-views", *EAGER, "b.py"], ctx.d)
    c = _run(["trace", "--out", "R", "--no-views", *EAGER, "b.py"], ctx.d)
    live = _inproc(["report", str(ctx.d / "R")])
    (ctx.d / "stop").write_text("")
    (ctx.d / "b.result").write_text(json.dumps(b.__dict__))
    (ctx.d / "live.result").write_text(json.dumps(live.__dict__))
    res_a = _finish(a)
    (ctx.d / "a.result").write_text(json.dumps(res_a.__dict__))
    return c


def _side(ctx: Ctx, name: str) -> Result:
    return Result(**json.loads((ctx.d / f"{name}.result").read_text()))


def _a_kept_its_run(ctx: Ctx, res: Result) -> list[str]:
    a, b = _side(ctx, "a"), _side(ctx, "b")
    problems = []
    if a.rc != 0 or a.stderr.strip():
        problems.append(f"the first trace: exit {a.rc}, stderr {a.stderr.strip()[-300:]!r}")
    if b.rc != 3 or not re.match(ctx.pattern(r"lazyscope: {d}/R is being written by pid \d+ "
                                             r"\(lazyscope trace a\.py"), b.stderr):
        problems.append(f"--force on a live run: exit {b.rc}, stderr {b.stderr.strip()!r}")
    meta = _meta(ctx.d / "R")
    said = re.search(r"a steps (\d+)", a.stdout)
    if not meta.get("target", "").endswith("a.py") or meta.get("status") != "ok" or \
            said is None or _nsteps(ctx.d / "R") != int(said.group(1)):
        problems.append(f"R is not a.py's whole run: {meta.get('target')} {meta.get('status')}, "
                        f"{_nsteps(ctx.d / 'R')} steps, a.py made {said and said.group(1)}")
    return problems


def _live_report(ctx: Ctx, res: Result) -> list[str]:
    live = _side(ctx, "live")
    if live.rc != 0 or "  status      running" not in live.stdout or \
            not re.match(r"run still being written by pid \d+ \(.*\): the report so far\n",
                         live.stdout):
        return [f"report of the live run: exit {live.rc}, it does not say it is being written: "
                f"{live.stdout[:300]!r} {live.stderr[:300]!r}"]
    return []


def _two_force(ctx: Ctx) -> Result:
    """Two --force traces started together over one old run: one at a time, never a mix."""
    make_run(ctx.d / "R", 2)
    _write(ctx, "a.py", prog(steps=30, sleep=0.05, backend="eager"))
    _write(ctx, "b.py", prog(steps=31, sleep=0.05, backend="eager"))
    procs = [_start(["trace", "--out", "R", "--force", "--no-views", *EAGER, n], ctx.d)
             for n in ("a.py", "b.py")]
    results = [_finish(p) for p in procs]
    (ctx.d / "both.result").write_text(json.dumps([r.__dict__ for r in results]))
    # the row: the refused one if any, else the last to finish
    refused = [r for r in results if r.rc != 0]
    return refused[0] if refused else results[-1]


def _never_mixed(ctx: Ctx, res: Result) -> list[str]:
    both = [Result(**r) for r in json.loads((ctx.d / "both.result").read_text())]
    meta, steps = _meta(ctx.d / "R"), _nsteps(ctx.d / "R")
    target = os.path.basename(meta.get("target", ""))
    problems = []
    if {target: steps}.get("a.py", 30) != 30 or {target: steps}.get("b.py", 31) != 31 or \
            target not in ("a.py", "b.py"):
        problems.append(f"R holds a mix: target {target} with {steps} steps")
    for r in both:
        if r.rc not in (0, 3) or (r.rc == 3 and "is being written by pid" not in r.stderr):
            problems.append(f"exit {r.rc}: {r.stderr.strip()[-300:]!r}")
    return problems


def _same_second(ctx: Ctx) -> Result:
    """Two traces of one script with the default --out started together."""
    _write(ctx, "prog.py", prog(steps=12, sleep=0.05, backend="eager"))
    procs = [_start(["trace", "--no-views", *EAGER, "prog.py"], ctx.d) for _ in range(2)]
    results = [_finish(p) for p in procs]
    bad = [r for r in results if r.rc != 0]
    return bad[0] if bad else results[0]


def _two_runs(ctx: Ctx, res: Result) -> list[str]:
    runs = sorted((ctx.d / "runs").iterdir())
    if len(runs) != 2 or any(_nsteps(r) != 12 or _meta(r).get("status") != "ok" for r in runs):
        return [f"expected two runs of 12 steps: {[(r.name, _nsteps(r)) for r in runs]}"]
    return []


def _script_in_old_run(ctx: Ctx) -> None:
    make_run(ctx.d / "R")
    _write(ctx, "R/train.py", prog(backend="eager"))


def _big_meta_run(ctx: Ctx) -> None:
    """An old run whose meta.json is over 4 MiB (a failed run of an older lazyscope that kept a
    10 MB error message)."""
    make_run(ctx.d / "R", 2)
    meta = json.loads((ctx.d / "R" / "meta.json").read_text())
    meta.update(status="failed", error="x" * (10 << 20))
    (ctx.d / "R" / "meta.json").write_text(json.dumps(meta))
    _write(ctx, "prog.py", prog(backend="eager"))


def _rank_dir_with_user_files(ctx: Ctx) -> None:
    make_run(ctx.d / "R" / "rank0")
    (ctx.d / "R" / "notes.txt").write_text("mine\n")
    (ctx.d / "R" / "data").mkdir()
    (ctx.d / "R" / "data" / "x.csv").write_text("1,2\n")
    _write(ctx, "prog.py", prog(backend="eager"))


def _user_files_kept(ctx: Ctx, res: Result) -> list[str]:
    ok = (ctx.d / "R" / "notes.txt").is_file() and (ctx.d / "R" / "data" / "x.csv").is_file()
    return [] if ok else ["the user's files next to rank0/ were deleted"]


# -- a trace belongs to the process that started it (G2) ----------------------------------

FORKS = """\
#PRE
import signal
parent = os.getpid()
kids = []
#HOOK
if i in (1, 2, 3):
    pid = os.fork()
    if pid == 0:
        signal.alarm(2)  # torch_xla hangs a forked child at exit (untraced too): end it
        time.sleep(0.2)
        if i == 1:
            sys.exit(0)          # a child that exits normally
        if i == 3:
            os._exit(0)          # the documented way for a child
        break                    # a child that falls off the end of the program
    kids.append(pid)
#POST
if os.getpid() == parent:
    for k in kids:
        os.waitpid(k, 0)
    print("parent done", flush=True)
"""


def _sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("#") and line[1:] in ("PRE", "PRESYNC", "HOOK", "POST"):
            cur = line[1:].lower()
            continue
        if cur:
            out.setdefault(cur, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _forks(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=6, sleep=0.2, **_sections(FORKS)))
    return _run(["trace", "--out", "R", "--no-views", "prog.py"], ctx.d)


def _parent_run_whole(ctx: Ctx, res: Result) -> list[str]:
    meta = _meta(ctx.d / "R")
    counts = meta.get("info", {}).get("runtime_counts", {})
    problems = []
    if res.stdout.count("lazyscope report:") != 1 or res.stdout.count("run saved in") != 1:
        problems.append(f"{res.stdout.count('lazyscope report:')} reports printed, not 1")
    if counts.get("ExecuteTime") != 6 or meta.get("status") != "ok":
        problems.append(f"status {meta.get('status')}, runtime counts {counts} (6 executions)")
    return problems


CHILD = """\
import torch, torch_xla
dev = torch_xla.device()
a = torch.ones(8, 8, device=dev)
for _ in range(2):
    a = a @ a * 0.5
    torch_xla.sync()
import os
print("child env:", sorted(k for k in os.environ if k.startswith("PT_XLA_DEBUG")
      or k == "LAZYSCOPE_XLA_DUMP_DIR" or "xla_dump" in os.environ.get(k, "")), flush=True)
"""


def _xla_child(ctx: Ctx) -> Result:
    _write(ctx, "child.py", CHILD)
    _write(ctx, "prog.py", prog(steps=4, pre="import subprocess", hook="""\
if i == 1:
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "child.py")], check=True)"""))
    return _run(["trace", "--out", "R", "--no-views", "prog.py"], ctx.d)


def _child_not_in_run(ctx: Ctx, res: Result) -> list[str]:
    problems = []
    if "child env: []" not in res.stdout:
        problems.append("the child inherited the trace's environment: " +
                        next((ln for ln in res.stdout.splitlines() if "child env" in ln), "?"))
    if "child.py" in res.stdout.split("lazyscope report:")[-1] or \
            "child.py" in (ctx.d / "R" / "xla_debug.txt").read_text(errors="replace"):
        problems.append("the child's compilations are in the parent's run")
    # the parent's own two graphs (w + 1 on the zeros it made, then on device data), not the
    # child's
    counts = _meta(ctx.d / "R").get("info", {}).get("runtime_counts", {})
    if counts.get("CompileTime") != 2 or _report_of(ctx.d / "R").get("compiles") != 2:
        problems.append(f"the parent's run counts other compilations than its own: {counts}")
    return problems


# -- paths fixed at start (G3) ------------------------------------------------------------


def _chdir_elsewhere(ctx: Ctx) -> Result:
    """Relative --out, a profile window, and the program moves into a directory holding
    another run under the same relative name."""
    make_run(ctx.d / "elsewhere" / "R", 3)
    _write(ctx, "prog.py", prog(steps=5, hook='if i == 0:\n    os.chdir("elsewhere")'))
    return _run(["trace", "--out", "R", "--profile-steps", "1:3", "--no-views", "prog.py"],
                ctx.d)


def _other_run_untouched(ctx: Ctx, res: Result) -> list[str]:
    other = ctx.d / "elsewhere" / "R"
    if _nsteps(other) != 3 or _meta(other).get("target") != "train.py" or \
            (other / "tensorboard").exists():
        return ["the other run under elsewhere/R was written into"]
    return []


def _profile_in_run(ctx: Ctx, res: Result) -> list[str]:
    if not list((ctx.d / "R" / "tensorboard").rglob("*.xplane.pb")):
        return ["no profile in R/tensorboard"]
    return []


def _chdir_default_raise(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=5, hook='if i == 1:\n    os.makedirs("sub", '
                                "exist_ok=True)\n    os.chdir('sub')\nif i == 3:\n    raise "
                                "ValueError('boom')"))
    return _run(["trace", "--no-views", "prog.py"], ctx.d)


def _default_run(ctx: Ctx) -> Path:
    runs = list((ctx.d / "runs").glob("prog-*"))
    return runs[0] if len(runs) == 1 else ctx.d / "runs" / "missing"


def _failed_default_run(ctx: Ctx, res: Result) -> list[str]:
    run = _default_run(ctx)
    problems = []
    if _meta(run).get("status") != "failed" or not (run / "error.txt").is_file():
        problems.append(f"{run}: status {_meta(run).get('status')}, error.txt "
                        f"{(run / 'error.txt').is_file()}")
    if (ctx.d / "sub" / "runs").exists():
        problems.append("a run directory was made in the directory the program moved to")
    return problems


def _closerange(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", hook="""\
if i == 2:
    os.closerange(3, 1024)
    fh = open("mine.txt", "w")
    fh.write("precious output\\n" * 100)
    fh.flush()"""))


def _mine_intact(ctx: Ctx, res: Result) -> list[str]:
    size = (ctx.d / "mine.txt").stat().st_size if (ctx.d / "mine.txt").exists() else -1
    return [] if size == 1600 else [f"the program's own mine.txt has {size} bytes, not 1600"]


def _deletes_run(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", pre="import shutil",
                                hook='if i == 2:\n    shutil.rmtree("R")'))


def _renamed(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=30, sleep=0.1, backend="eager"))
    p = _start(["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], ctx.d)
    _wait(lambda: _nsteps(ctx.d / "R") >= 3, p)
    os.rename(ctx.d / "R", ctx.d / "R.moved")
    return _finish(p)


def _umask(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", hook="if i == 1:\n    os.umask(0o777)"))


def _readable_files(ctx: Ctx, res: Result) -> list[str]:
    bad = [f"{p.relative_to(ctx.d)} {oct(p.stat().st_mode & 0o777)}"
           for p in [ctx.d / "R", *(ctx.d / "R").rglob("*")]
           if not p.stat().st_mode & 0o444 or (p.is_dir() and not p.stat().st_mode & 0o111)]
    return [f"files lazyscope wrote cannot be read: {bad[:5]}"] if bad else []


# -- termination (G4) ---------------------------------------------------------------------


def _signal(signum: int, *, backend: str = "eager", after: int = 3) -> Callable[[Ctx], Result]:
    def run(ctx: Ctx) -> Result:
        _write(ctx, "prog.py", prog(steps=60, sleep=0.1, backend=backend))
        extra = EAGER if backend == "eager" else []
        p = _start(["trace", "--out", "R", "--no-views", *extra, "prog.py"], ctx.d)
        (ctx.d / "pid").write_text(str(p.pid))
        if after:
            _wait(lambda: _nsteps(ctx.d / "R") >= after, p)
        else:
            time.sleep(1.0)  # lazyscope is still importing torch_xla
        p.send_signal(signum)
        return _finish(p)
    return run


def _no_dump_dir_left(ctx: Ctx, res: Result) -> list[str]:
    import glob

    pid = (ctx.d / "pid").read_text()
    left = [p for base in ("/dev/shm", tempfile.gettempdir())
            for p in glob.glob(os.path.join(base, f"lazyscope-hlo-{pid}-*"))]
    return [f"its private directory was left behind: {left}"] if left else []


def _abort(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", hook="if i == 2:\n    os.abort()"))


def _os_exit(code: int) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _write(ctx, "prog.py", prog(backend="eager", post=f"os._exit({code})"))
    return setup


def _compare_signal(signum: int) -> Callable[[Ctx], Result]:
    """compare stopped by a signal sent to its pid alone (a process manager's kill), while a
    policy's trace runs: it must pass the signal on at once and end within seconds."""
    def run(ctx: Ctx) -> Result:
        p = _start(["compare", "--policies", "max,longest", "--steps", "400",
                    "--preset", "tiny", "--backends", "eager", "--out", "C", "decoder"], ctx.d)
        _wait(lambda: _nsteps(ctx.d / "C" / "eager" / "max") >= 2, p, timeout=240)
        sent = time.monotonic()
        p.send_signal(signum)
        res = _finish(p)
        (ctx.d / "stop_seconds").write_text(f"{time.monotonic() - sent:.2f}")
        return res
    return run


def _stopped_within(seconds: float) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        took = float((ctx.d / "stop_seconds").read_text())
        return [] if took <= seconds else [f"compare took {took:.1f} s to stop"]
    return check


def _no_orphan(ctx: Ctx, res: Result) -> list[str]:
    run = ctx.d / "C" / "eager" / "max"
    time.sleep(0.5)
    n, status = _nsteps(run), _meta(run).get("status")
    time.sleep(1.0)
    if _nsteps(run) != n:
        return ["the policy's trace keeps running after compare ended"]
    return [] if status == "interrupted" else [f"the policy's run is {status!r}"]


# -- lazyscope's own writes survive the program's streams (G5) ----------------------------


def _streams_fail(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", pre="import io", hook="""\
if i == 2:
    os.close(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    raise ValueError("boom")"""))


def _objects_fail(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", pre="import io", hook="""\
if i == 2:
    sys.stdout.close()
    sys.stderr = io.StringIO()
    raise ValueError("boom")"""))


def _stdout_replaced(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", pre="import io",
                                post="sys.stdout = io.StringIO()"))


def _report_shown(ctx: Ctx, res: Result) -> list[str]:
    return [] if "lazyscope report:" in res.stdout else ["the report was not printed"]


def _to_devfull(argv: list[str], *, trace: bool = False) -> Callable[[Ctx], Result]:
    def run(ctx: Ctx) -> Result:
        if trace:
            _write(ctx, "prog.py", prog(backend="eager"))
        else:
            make_run(ctx.d / "R")
        with open("/dev/full", "w") as full:
            return _run([ctx.fmt(a) for a in argv], ctx.d, stdout=full)
    return run


def _head(ctx: Ctx) -> Result:
    """`lazyscope trace ... | head -1` where head has already exited when the report comes
    (a report that fits the pipe's buffer before the reader leaves is simply written)."""
    _write(ctx, "prog.py", prog(backend="eager"))
    p = _start(["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], ctx.d)
    assert p.stdout is not None
    p.stdout.close()
    _, err = p.communicate(timeout=300)
    return Result(p.returncode, "", err.decode("utf-8", "backslashreplace"))


# -- one error boundary (G6), text that reaches messages (G8) ------------------------------

LONG = "x" * 300


def _exception(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", hook="""\
if i == 2:
    raise RuntimeError("first line " + "x" * (10 << 20) + "\\nsecond line\\nthird line")"""))


def _bounded(ctx: Ctx, res: Result) -> list[str]:
    problems = []
    if len(res.stderr) > 2000:
        problems.append(f"stderr is {len(res.stderr)} characters")
    if (ctx.d / "R" / "meta.json").stat().st_size > 64 << 10:
        problems.append("meta.json holds the whole message")
    if (ctx.d / "R" / "error.txt").stat().st_size < 10 << 20:
        problems.append("error.txt lost the whole message")
    return problems


def _non_utf8_arg_run(ctx: Ctx) -> None:
    make_run(ctx.d / "R")
    meta = json.loads((ctx.d / "R" / "meta.json").read_text())
    meta["args"] = ["--name", os.fsdecode(b"caf\xe9")]
    (ctx.d / "R" / "meta.json").write_text(json.dumps(meta))


def _non_utf8_script(ctx: Ctx) -> Result:
    name = os.fsdecode(b"pr\xffog.py")
    _write(ctx, name, prog())
    return _inproc(["trace", "--out", str(ctx.d / "R"), str(ctx.d / name)])


def _newline_out(ctx: Ctx) -> Result:
    name = ctx.d / "R\nlazyscope: all good"
    name.write_text("a file")
    return _inproc(["trace", "--out", str(name), ctx.fmt("{s}/loop.py")])


# -- annotations are host values (G7) -------------------------------------------------------

ANNOTATE = """\
#PRE
import lazyscope
from lazyscope.core.errors import UsageError
class Weird:
    def __str__(self):
        raise RuntimeError("no str")
def refused(name, call):
    try:
        call()
    except UsageError as err:
        print(f"REFUSED {name}: {err}", flush=True)
#PRESYNC
loss = (w * 2).sum()
if i == 0:
    refused("pending", lambda: lazyscope.annotate_step(t=loss))
#HOOK
if i == 0:
    refused("device", lambda: lazyscope.annotate_step(t=loss))
    refused("step-key", lambda: lazyscope.annotate_step(step="x"))
    refused("bad-str", lambda: lazyscope.annotate_step(w=Weird()))
    refused("note", lambda: lazyscope.note(loss))
lazyscope.annotate_step(tokens=100 + i)
if i == 3:
    lazyscope.set_info(last_loss=loss)   # not caught: the trace ends with its line
"""


def _annotate(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=5, **_sections(ANNOTATE)))
    return _run(["trace", "--out", "R", "--no-views", "prog.py"], ctx.d)


def _refused(name: str) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith(f"REFUSED {name}:")),
                    None)
        if line is None:
            return [f"lazyscope accepted the {name} value"]
        return []
    return check


def _never_read(ctx: Ctx, res: Result) -> list[str]:
    """The device tensor was never read: no device-to-host transfer in the program's run (it
    reads nothing itself), and the annotations that were given are kept."""
    counts = _meta(ctx.d / "R").get("info", {}).get("runtime_counts", {})
    problems = []
    if counts.get("TransferFromDeviceTime"):
        problems.append(f"{counts['TransferFromDeviceTime']} device-to-host transfer(s): "
                        "lazyscope read the tensor")
    lines = (ctx.d / "R" / "annotations.jsonl").read_text().splitlines()
    # annotate_step after a step's barrier annotates the next step
    if [json.loads(ln) for ln in lines][:3] != [{"step": k + 1, "tokens": 100 + k}
                                                 for k in range(3)]:
        problems.append(f"annotations: {lines[:4]}")
    return problems


# -- the Python API says when it cannot observe (G9) --------------------------------------

API_SEQUENCE = """\
import torch, torch_xla, lazyscope
from lazyscope.core.errors import UsageError
dev = torch_xla.device()
x = torch.zeros(4, device=dev)
with lazyscope.trace("A"):
    from torch_xla import sync     # bound while A traces
    for _ in range(3):
        x = x + 1; sync()
sync()                             # after A ended
print("stale sync after A: ok", flush=True)
with lazyscope.trace("B"):
    for _ in range(3):
        x = x * 2; sync()          # A's binding, in B
t = lazyscope.trace("C")
with t:
    x = x - 1; torch_xla.sync()
    try:
        with t:
            pass
    except UsageError as err:
        print("REENTER", err, flush=True)
"""


def _api_sequence(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", API_SEQUENCE)
    return _run(["prog.py"], ctx.d, python=True)


def _report_of(run: Path) -> dict[str, Any]:
    res = _inproc(["report", str(run), "--format", "json"])
    return json.loads(res.stdout) if res.rc == 0 else {"error": res.stderr}


def _second_trace_sees(ctx: Ctx, res: Result) -> list[str]:
    b = _report_of(ctx.d / "B")
    problems = []
    if b.get("steps") != 3 or b.get("compiles") != 1 or b.get("distinct_graphs") != 1:
        problems.append(f"B: steps {b.get('steps')}, compiles {b.get('compiles')}, distinct "
                        f"graphs {b.get('distinct_graphs')} (3, 1, 1)")
    if not any("an earlier trace ran in this process" in n for n in b.get("run_notes", [])):
        problems.append("B's notes do not say an earlier trace ran in the process")
    return problems


def _reenter_refused(ctx: Ctx, res: Result) -> list[str]:
    c = _meta(ctx.d / "C")
    if "REENTER" not in res.stdout or "cannot be entered again" not in res.stdout or \
            c.get("status") != "ok":
        return [f"re-entering a trace: {res.stdout[-300:]!r}, C is {c.get('status')}"]
    return []


LATE = """\
import torch, torch_xla, lazyscope
dev = torch_xla.device()
def step(n):
    global keep
    keep = (torch.randn(n, 16).to(dev) * 2).sum()
    torch_xla.sync()
step(4)                             # torch_xla compiles before the trace
with lazyscope.trace("R"):
    for n in (4, 5, 6, 7):          # 5, 6, 7 compile new graphs
        step(n)
"""


def _late(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", LATE)
    return _run(["prog.py"], ctx.d, python=True)


def _late_said(ctx: Ctx, res: Result) -> list[str]:
    r = _report_of(ctx.d / "R")
    problems = []
    if not str(r.get("verdict", "")).startswith("compile causes unknown: 3 compilations") or \
            r.get("clean"):
        problems.append(f"verdict {r.get('verdict')!r}, clean {r.get('clean')}")
    if not any("torch_xla had compiled before this trace began" in n
               for n in r.get("run_notes", [])):
        problems.append("the notes do not say why compilations are unexplained")
    return problems


NESTED = """\
#PRE
import lazyscope
inner = lazyscope.trace("INNER")
#HOOK
if i == 1:
    inner.__enter__()
if i == 3:
    inner.__exit__(None, None, None)
lazyscope.annotate_step(tokens=100 + i)
"""


def _nested(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=6, **_sections(NESTED)))
    return _run(["trace", "--out", "R", "--no-views", "prog.py"], ctx.d)


def _nested_said(ctx: Ctx, res: Result) -> list[str]:
    outer, inner = _report_of(ctx.d / "R"), _report_of(ctx.d / "INNER")
    problems = []
    # annotate_step after a barrier annotates the next step: steps 1..5; the sixth call is
    # after the last barrier, kept only with the run's tail record (written when torch_xla's
    # last execution is counted after that barrier: a busy machine)
    lines = [json.loads(ln) for ln in (ctx.d / "R" / "annotations.jsonl").read_text()
             .splitlines()]
    expected = [{"step": k + 1, "tokens": 100 + k} for k in range(6)]
    if outer.get("steps") != 6 or lines not in (expected[:5], expected):
        problems.append(f"the outer run lost steps or annotations: {outer.get('steps')}, "
                        f"{lines}")
    if not any("nested lazyscope.trace(INNER) was entered at step 2" in n
               for n in outer.get("run_notes", [])):
        problems.append(f"the outer run does not say a trace was nested: "
                        f"{outer.get('run_notes')}")
    if not any("entered inside the trace writing" in n for n in inner.get("run_notes", [])):
        problems.append(f"the inner run does not say why it is empty: {inner}")
    return problems


# -- run files that cannot be true (G10) ------------------------------------------------------

# the store's own layout: a record's kind, its step, then STEP_FIELDS in order
STEP = STEP_RECORD
EVENT = EVENT_RECORD
FIELDS = tuple(STEP_FIELDS)


def _events_run(path: Path) -> None:
    """A finished 5-step XLA-shaped run with a compilation at step 1 and a sync per step."""
    from lazyscope.model import STEP_FIELDS, Compile, Sync
    from tests.builders import build_run, frame

    stack = (frame("/w/train.py", 12),)
    steps = [{f: 0.0 for f in STEP_FIELDS} | {"wall_s": 0.01, "t_end_s": 0.01 * (i + 1),
                                               "execute_count": 1.0,
                                               "compile_count": float(i == 1)}
             for i in range(5)]
    events = [{"kind": "compile", "step": 1, "stack": stack, "key": "g1",
               "payload": Compile(phase="graph", cause="user", cause_kind="user")}]
    events += [{"kind": "sync", "step": i, "stack": stack, "payload": Sync(), "value": 0.0}
               for i in range(5)]
    build_run(path, steps=steps, events=events, info={"runtime_counts": {"ExecuteTime": 5}})


def _edit(how: Callable[[Path], None]) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _events_run(ctx.d / "R")
        how(ctx.d / "R")
    return setup


def _step_field(index: int, name: str, value: float) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        raw = bytearray((run / "steps.bin").read_bytes())
        rec = list(STEP.unpack_from(raw, index * STEP.size))
        rec[2 + FIELDS.index(name)] = value
        STEP.pack_into(raw, index * STEP.size, *rec)
        (run / "steps.bin").write_bytes(bytes(raw))
    return edit


def _event_step(value: int) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        raw = bytearray((run / "events.bin").read_bytes())
        rec = list(EVENT.unpack_from(raw, 0))
        rec[2] = value
        EVENT.pack_into(raw, 0, *rec)
        (run / "events.bin").write_bytes(bytes(raw))
    return edit


def _meta_set(key: str, value: Any) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        meta = json.loads((run / "meta.json").read_text())
        meta[key] = value
        (run / "meta.json").write_text(json.dumps(meta))
    return edit


def _symlinked_out(ctx: Ctx) -> None:
    """--out under a symbolic link to a directory: nothing is moved while the program runs."""
    _write(ctx, "prog.py", prog(backend="eager"))
    (ctx.d / "real").mkdir(exist_ok=True)
    if not (ctx.d / "link").is_symlink():
        (ctx.d / "link").symlink_to(ctx.d / "real")


def _symlink_loop(ctx: Ctx) -> None:
    for a, b in (("a.py", "b.py"), ("b.py", "a.py")):
        if not (ctx.d / a).is_symlink():
            (ctx.d / a).symlink_to(ctx.d / b)


def _meta_runtime_count(key: str, value: Any) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        meta = json.loads((run / "meta.json").read_text())
        meta.setdefault("info", {}).setdefault("runtime_counts", {})[key] = value
        (run / "meta.json").write_text(json.dumps(meta))
    return edit


def _meta_drop(key: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        meta = json.loads((run / "meta.json").read_text())
        meta.pop(key, None)
        (run / "meta.json").write_text(json.dumps(meta))
    return edit


def _random_events(run: Path) -> None:
    import random

    rng = random.Random(1)
    (run / "events.bin").write_bytes(bytes(rng.getrandbits(8) for _ in range(400)))


def _fifo_steps(run: Path) -> None:
    (run / "steps.bin").unlink()
    os.mkfifo(run / "steps.bin")


def _warns(text: str) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        warned = [ln for ln in res.stdout.splitlines() if ln.startswith("  warning") or
                  "warning" in ln]
        if not any(text in ln for ln in res.stdout.splitlines()):
            return [f"no warning {text!r}: {warned[:3]}"]
        return []
    return check


def _not_shown(*texts: str) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        return [f"the report shows {t!r}" for t in texts if t in res.stdout]
    return check


def _field(key: str, want: Any) -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        have = _report_of(ctx.d / "R").get(key)
        return [] if have == want else [f"the JSON report's {key} is {have!r}, not {want!r}"]
    return check


def _check_fails(ctx: Ctx, res: Result) -> list[str]:
    gate = _inproc(["check", str(ctx.d / "R")])
    return [] if gate.rc == 1 else [f"check exits {gate.rc} on it"]


# -- gates that pass what they should not (G11) ---------------------------------------------


def _eager_and_xla_runs(ctx: Ctx) -> None:
    """An XLA run and an eager CPU run (which measures no host syncs) of one program."""
    _write(ctx, "prog.py", prog(steps=4, hook="v = w.sum().item()"))
    eager = prog(steps=4, hook="v = w.sum().item()", backend="eager")
    _write(ctx, "eprog.py", eager)
    for argv in (["trace", "--out", "X", "--no-views", "prog.py"],
                 ["trace", "--out", "E", "--no-views", *EAGER, "eprog.py"]):
        done = _run(argv, ctx.d)
        assert done.rc == 0, done.stderr[-2000:]


def _no_delta_for_unmeasured(ctx: Ctx, res: Result) -> list[str]:
    diff = json.loads(res.stdout)
    syncs = next(m for m in diff["metrics"] if m["name"] == "host_syncs")
    problems = []
    if syncs["a"] is not None or syncs["delta"] is not None or syncs["b"] != 4:
        problems.append(f"host_syncs: {syncs}")
    if any("sync at" in f for f in diff["findings"]["appeared"]):
        problems.append("a sync finding 'appeared' for a metric the baseline does not measure")
    return problems


def _steps_swallowed(ctx: Ctx) -> None:
    _write(ctx, "prog.py", """\
import torch, lazyscope
w = torch.zeros(4)
caught = 0
for i in range(8):
    w = w + 1
    try:
        lazyscope.barrier()
    except BaseException:
        caught += 1
print("caught", caught, flush=True)
""")


def _limit_note(ctx: Ctx, res: Result) -> list[str]:
    notes = _report_of(ctx.d / "R").get("run_notes", [])
    if not any("caught lazyscope's stop at --steps 2 and went on: 6 later barriers "
               "not recorded" in n for n in notes):
        return [f"no note that the program went on past --steps: {notes}"]
    return []


CASES3: list[Case] = [
    # -- G1: one live trace owns a run directory
    Case("conc-force-while-running", [], 3,
         r"lazyscope: {d}/R is being written by pid \d+ \(lazyscope trace a\.py, since ",
         run="{d}/R", kept=3, shared="force-live",
         runner=_force_while_running, overlap=False, extra=_a_kept_its_run),
    Case("conc-same-out-no-force", [], 3,
         r"lazyscope: {d}/R is being written by pid \d+ \(lazyscope trace a\.py",
         run="{d}/R", kept=3, shared="force-live",
         runner=_force_while_running, overlap=False),
    Case("conc-report-live", [], 3, r"lazyscope: {d}/R is being written by pid",
         run="{d}/R", kept=3, shared="force-live", runner=_force_while_running, overlap=False,
         extra=_live_report),
    Case("conc-two-force-same-time", [], (0, 3),
         r"lazyscope: {d}/R is being written by pid \d+ \(lazyscope trace [ab]\.py",
         allow_empty_stderr=True, run="{d}/R", kept=30, runner=_two_force,
         extra=_never_mixed),
    Case("conc-default-out-same-second", [], 0, None, runner=_same_second, extra=_two_runs),
    Case("force-deletes-script", ["trace", "--out", "{d}/R", "--force",
                                  *EAGER, "{d}/R/train.py"], 3,
         r"lazyscope: {d}/R holds {d}/R/train\.py, which this trace needs; refusing to replace "
         r"it$", run="{d}/R", kept=5, kept_exact=True, setup=_script_in_old_run),
    Case("force-over-big-meta-run", ["trace", "--out", "{d}/R", "--force",
                                     "--no-views", *EAGER, "{d}/prog.py"], 0, None, program_output=True,
         run="{d}/R", kept=5, kept_exact=True, setup=_big_meta_run, extra=_status("{d}/R", "ok")),
    Case("force-rank-dir-foreign-files", ["trace", "--out", "{d}/R", "--force",
                                          *EAGER, "{d}/prog.py"], 3,
         r"lazyscope: {d}/R holds files lazyscope did not write \(data/, notes\.txt\); refusing "
         r"to replace it", setup=_rank_dir_with_user_files, extra=_user_files_kept),
    # -- G2: a trace belongs to its process
    Case("fork-child-sys-exit", [], 0, None, program_output=True, run="{d}/R", kept=6,
         kept_exact=True, shared="forks", runner=_forks, extra=_parent_run_whole),
    Case("fork-child-falls-off-end", [], 0, None, program_output=True, run="{d}/R", kept=6,
         kept_exact=True, shared="forks", runner=_forks, extra=_parent_run_whole),
    Case("fork-child-os-exit", [], 0, None, program_output=True, run="{d}/R", kept=6,
         kept_exact=True, shared="forks", runner=_forks, extra=_parent_run_whole),
    Case("fork-subprocess-xla-child", [], 0, None, program_output=True, run="{d}/R", kept=4,
         kept_exact=True, runner=_xla_child, extra=_child_not_in_run),
    # -- G3: paths fixed at start, files that survive the program
    Case("chdir-relative-out", [], 0, None, run="{d}/R", kept=5, kept_exact=True,
         shared="chdir", runner=_chdir_elsewhere, extra=_status("{d}/R", "ok")),
    Case("chdir-into-other-run", [], 0, None, run="{d}/R", kept=5, kept_exact=True,
         shared="chdir", runner=_chdir_elsewhere, extra=_other_run_untouched),
    Case("chdir-with-profile", [], 0, None, run="{d}/R", kept=5, kept_exact=True,
         shared="chdir", runner=_chdir_elsewhere, extra=_profile_in_run),
    Case("chdir-default-out", [], 5,
         r"lazyscope: prog\.py failed: ValueError: boom \(at {d}/prog\.py:\d+\); the run so far "
         r"is kept in runs/prog-\d+-\d+ \(status failed\)$", shared="chdir-raise",
         runner=_chdir_default_raise, extra=_failed_default_run),
    Case("chdir-then-raise", [], 5, r"lazyscope: prog\.py failed: ValueError: boom",
         shared="chdir-raise", runner=_chdir_default_raise, extra=_failed_default_run),
    Case("end-closes-lazyscope-fds", ["trace", "--out", "{d}/R", "--no-views",
                                      *EAGER, "{d}/prog.py"], 0, None, run="{d}/R", kept=5, kept_exact=True,
         cwd="{d}", setup=_closerange, extra=_checks(_mine_intact, _report_shown)),
    Case("end-deletes-run-dir", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 3,
         r"lazyscope: the run directory {d}/R was removed while the run was written: nothing "
         r"of it could be kept$", cwd="{d}", setup=_deletes_run),
    Case("end-run-dir-renamed", [], 0,
         r"lazyscope: warning: R was moved to {d}/R\.moved while the program ran; the run is "
         r"kept there$", run="{d}/R.moved", kept=30, kept_exact=True, runner=_renamed,
         extra=_checks(_status("{d}/R.moved", "ok"), _says("run saved in {d}/R.moved"))),
    Case("umask-777", ["trace", "--out", "R", *EAGER, "prog.py"], 0, None, cwd="{d}",
         run="{d}/R", kept=5, kept_exact=True, setup=_umask, extra=_readable_files),
    # -- G4: termination
    Case("signal-sigterm", [], 143,
         r"lazyscope: terminated by SIGTERM; the run so far is kept in R \(status "
         r"interrupted\)$", run="{d}/R", kept=3, runner=_signal(signal.SIGTERM, backend="xla"),
         extra=_status("{d}/R", "interrupted")),
    Case("signal-sighup", [], 129,
         r"lazyscope: terminated by SIGHUP; the run so far is kept in R \(status interrupted\)$",
         run="{d}/R", kept=3, runner=_signal(signal.SIGHUP),
         extra=_status("{d}/R", "interrupted")),
    Case("signal-sigquit", [], 131, r"lazyscope: terminated by SIGQUIT; the run so far is kept",
         run="{d}/R", kept=3, runner=_signal(signal.SIGQUIT),
         extra=_status("{d}/R", "interrupted")),
    Case("signal-sigusr1", [], 138, r"lazyscope: terminated by SIGUSR1; the run so far is kept",
         run="{d}/R", kept=3, runner=_signal(signal.SIGUSR1),
         extra=_status("{d}/R", "interrupted")),
    Case("signal-sigterm-at-startup", [], 143, r"lazyscope: terminated by SIGTERM$",
         runner=_signal(signal.SIGTERM, backend="xla", after=0), extra=_no_dump_dir_left),
    Case("signal-os-abort", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 134,
         r"lazyscope: prog\.py failed: the program aborted \(os\.abort\(\): SIGABRT\); the run "
         r"so far is kept in R \(status failed\)$", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, setup=_abort, extra=_status("{d}/R", "failed")),
    Case("end-os-exit-0", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 0, None,
         cwd="{d}", run="{d}/R", kept=5, kept_exact=True, setup=_os_exit(0),
         extra=_checks(_status("{d}/R", "ok"), _report_shown)),
    Case("end-os-exit-3", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: the program ended the process with os\._exit\(3\); the "
         r"run so far is kept in R \(status failed\)$", cwd="{d}", run="{d}/R", kept=5,
         kept_exact=True, setup=_os_exit(3), extra=_status("{d}/R", "failed")),
    Case("out-through-a-symlink", ["trace", "--out", "link/R", "--no-views", *EAGER, "prog.py"],
         0, None, cwd="{d}", run="{d}/real/R", kept=5, kept_exact=True, setup=_symlinked_out,
         extra=_says("run saved in link/R")),
    Case("compare-sigterm", [], 143, r"lazyscope: terminated by SIGTERM$",
         program_output=True, runner=_compare_signal(signal.SIGTERM),
         extra=_checks(_no_orphan, _stopped_within(20))),
    Case("compare-sigint-to-its-pid", [], 130, r"lazyscope: interrupted$",
         program_output=True, runner=_compare_signal(signal.SIGINT),
         extra=_checks(_no_orphan, _stopped_within(20))),
    # -- G5: lazyscope's own writes
    Case("stdout-os-close", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: ValueError: boom", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, shared="fd-streams", setup=_streams_fail, extra=_report_shown),
    Case("stderr-fd2-redirected", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: ValueError: boom", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, shared="fd-streams", setup=_streams_fail),
    Case("stdout-sys-close", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: ValueError: boom", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, shared="object-streams", setup=_objects_fail, extra=_report_shown),
    Case("stderr-sys-replaced", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: ValueError: boom", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, shared="object-streams", setup=_objects_fail),
    Case("stdout-replaced", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 0, None,
         cwd="{d}", run="{d}/R", kept=5, kept_exact=True, setup=_stdout_replaced,
         extra=_report_shown),
    Case("trace-stdout-devfull", [], 3,
         r"lazyscope: cannot write to stdout: No space left on device$", run="{d}/R", kept=5,
         kept_exact=True,
         runner=_to_devfull(["trace", "--out", "R", "--no-views", *EAGER, "prog.py"],
                            trace=True), extra=_status("{d}/R", "ok")),
    Case("signal-sigpipe-head", [], 141, None, run="{d}/R", kept=5, kept_exact=True,
         runner=_head, extra=_status("{d}/R", "ok")),
    Case("report-json-devfull", [], 3,
         r"lazyscope: cannot write to stdout: No space left on device$",
         runner=_to_devfull(["report", "{d}/R", "--format", "json"])),
    Case("report-text-devfull", [], 3,
         r"lazyscope: cannot write to stdout: No space left on device$",
         runner=_to_devfull(["report", "{d}/R"])),
    Case("check-devfull", [], 3, r"lazyscope: cannot write to stdout: No space left on device$",
         runner=_to_devfull(["check", "{d}/R"])),
    # -- G6: one error boundary
    Case("report-path-too-long", ["report", "{d}/" + LONG], 3,
         r"lazyscope: cannot read {d}/x+: the name is too long$", inproc=True),
    Case("out-component-too-long", ["trace", "--out", "{d}/" + LONG, "{s}/loop.py"], 3,
         r"lazyscope: cannot write {d}/x+: the name is too long$", inproc=True),
    Case("out-path-too-long", ["trace", "--out",
                               "{d}/" + "/".join(["y" * 200] * 23), "{s}/loop.py"], 3,
         r"lazyscope: cannot write {d}/y+\.\.\.[y/]+ \(\d+ characters\): the name is too long$",
         inproc=True),
    Case("out-files-would-be-too-long", ["trace", "--out", "{d}/" + "/".join(["z" * 200] * 19)
                                         + "/" + "z" * 150, "{s}/loop.py"], 3,
         r"lazyscope: cannot write {d}/z+\.\.\.[z/]+ \(\d+ characters\): its files' paths would "
         r"be \d+ bytes, past the system's \d+ \(choose a shorter --out\)$", inproc=True),
    # -- G7: annotations are host values
    Case("annotate-device-tensor", [], 2,
         r"lazyscope: lazyscope\.set_info\(last_loss=\.\.\.\): a torch tensor on xla is not a "
         r"host value; .*; the run so far is kept in R \(status failed\)$",
         program_output=True, run="{d}/R", kept=4, kept_exact=True, shared="annotate",
         runner=_annotate, extra=_checks(_refused("device"), _never_read)),
    Case("annotate-pending-tensor", [], 2, r"lazyscope: lazyscope\.set_info",
         program_output=True, run="{d}/R", kept=4, kept_exact=True, shared="annotate",
         runner=_annotate, extra=_checks(_refused("pending"), _never_read)),
    Case("set-info-device-tensor", [], 2, r"lazyscope: lazyscope\.set_info\(last_loss=",
         program_output=True, run="{d}/R", kept=4, kept_exact=True, shared="annotate",
         runner=_annotate, extra=_checks(_refused("note"), _status("{d}/R", "failed"))),
    Case("annotate-step-key", [], 2, r"lazyscope: lazyscope\.set_info",
         program_output=True, run="{d}/R", kept=4, kept_exact=True, shared="annotate",
         runner=_annotate, extra=_refused("step-key")),
    Case("annotate-bad-str", [], 2, r"lazyscope: lazyscope\.set_info",
         program_output=True, run="{d}/R", kept=4, kept_exact=True, shared="annotate",
         runner=_annotate, extra=_refused("bad-str")),
    # -- G8: text from the program or the OS
    Case("end-10mb-exception", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: RuntimeError: first line x+\.\.\. \(\d+ characters; the "
         r"whole message is in error\.txt\) \(\+2 more lines\) \(at {d}/prog\.py:\d+\); the run "
         r"so far is kept in R \(status failed\)$", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, shared="exception", setup=_exception, extra=_bounded),
    Case("end-multiline-exception", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"],
         5, r"lazyscope: prog\.py failed: RuntimeError: first line .*\(\+2 more lines\)",
         cwd="{d}", run="{d}/R", kept=3, kept_exact=True, shared="exception",
         setup=_exception),
    Case("nonutf8-arg-report-html", ["report", "{d}/R", "--format", "html"], 0, None,
         inproc=True, run="{d}/R", kept=5, setup=_non_utf8_arg_run),
    Case("nonutf8-script-name", [], 2,
         r"lazyscope: cannot trace {d}/pr\\xffog\.py on XLA: its path is not valid UTF-8",
         runner=_non_utf8_script, overlap=False),
    Case("newline-in-out", [], 3,
         r"lazyscope: {d}/R\\nlazyscope: all good exists and is not a directory$",
         runner=_newline_out, overlap=False),
    # -- G9: the Python API says when it cannot observe
    Case("api-two-traces-sequential", [], 0, None, program_output=True, run="{d}/B", kept=3,
         kept_exact=True, shared="api", runner=_api_sequence,
         extra=_second_trace_sees),
    Case("api-stale-sync-binding", [], 0, None, program_output=True, run="{d}/A", kept=3,
         kept_exact=True, shared="api", runner=_api_sequence,
         extra=_says("stale sync after A: ok", count=1)),
    Case("api-stale-sync-second-trace", [], 0, None, program_output=True, run="{d}/B", kept=3,
         kept_exact=True, shared="api", runner=_api_sequence,
         extra=_status("{d}/B", "ok")),
    Case("api-same-tracer-twice", [], 0, None, program_output=True, run="{d}/C", kept=1,
         kept_exact=True, shared="api", runner=_api_sequence, extra=_reenter_refused),
    Case("api-trace-after-first-sync", [], 0, None, run="{d}/R", kept=4, kept_exact=True,
         runner=_late, extra=_late_said),
    Case("api-trace-inside-cli-trace", [], 0, None, run="{d}/R", kept=6, kept_exact=True,
         runner=_nested, extra=_nested_said),
    # -- G10: loaded records validated for range
    Case("run-negative-wall", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R", kept=5,
         setup=_edit(_step_field(2, "wall_s", -5.0)),
         extra=_checks(_warns("value no step can have (step 2: wall_s -5.0)"),
                       _not_shown("-5000000"))),
    Case("run-negative-exec", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R", kept=5,
         setup=_edit(_step_field(2, "execute_count", -3.0)),
         extra=_checks(_warns("(step 2: execute_count -3.0)"), _field("executions", 4))),
    Case("run-huge-compile-count", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_step_field(1, "compile_count", 1e300)),
         extra=_checks(_warns("compile_count 1e+300"), _not_shown("1000000000000"))),
    Case("run-compile-count-2p63", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_step_field(1, "compile_count", float(2 ** 63))),
         extra=_checks(_warns("no step can have"), _not_shown("9223372036854775808"))),
    Case("run-event-step-2p62", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_event_step(2 ** 62)),
         extra=_checks(_warns("at a step outside the run's 0..5 (e.g. 4611686018427387904)"),
                       _not_shown("(steps 4611686018427387904"))),
    Case("run-event-step-neg7", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_event_step(-7)),
         extra=_checks(_warns("outside the run's 0..5 (e.g. -7)"), _not_shown("(steps -7"))),
    Case("run-empty-steps", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R", kept=0,
         kept_exact=True, setup=_edit(lambda r: (r / "steps.bin").write_bytes(b"")),
         extra=_checks(_warns("steps.bin holds no step, yet the backend's own counters"),
                       _check_fails)),
    Case("run-missing-steps", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R", kept=0,
         kept_exact=True, setup=_edit(lambda r: (r / "steps.bin").unlink()),
         extra=_checks(_warns("steps.bin is missing"), _check_fails)),
    # a run of any schema whose steps are gone is said so, and never passes the gate
    Case("run-schema1-no-steps", ["report", "{d}/R"], 0, None, inproc=True,
         setup=_edit(_meta_set("schema_version", 1)),
         extra=_checks(_warns("steps.jsonl is missing"), _check_fails)),
    Case("run-no-schema-no-steps", ["report", "{d}/R"], 0, None, inproc=True,
         setup=_edit(_meta_drop("schema_version")),
         extra=_checks(_warns("steps.jsonl is missing"), _check_fails)),
    Case("export-perfetto-into-a-directory", ["export", "{d}/R", "--out", "{d}/outdir"], 0,
         None, inproc=True, setup=_edit(lambda r: (r.parent / "outdir").mkdir(exist_ok=True)),
         extra=_says("{d}/outdir/trace.json")),
    Case("export-missing-steps", ["export", "{d}/R", "--format", "csv", "--out", "{d}/csv"], 0,
         r"lazyscope: warning: steps\.bin is missing: what it recorded is lost$", inproc=True,
         setup=_edit(lambda r: (r / "steps.bin").unlink())),
    Case("run-negative-runtime-count", ["report", "{d}/R"], 0, None, inproc=True,
         setup=_edit(_meta_runtime_count("ExecuteTime", -4)),
         extra=_checks(_warns("runtime counts that are no count (ExecuteTime -4)"),
                       _not_shown("runtime counts  ExecuteTime -4"), _check_fails)),
    Case("run-steps-fifo", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/steps\.bin is not a regular file: the run file is corrupt$",
         inproc=True, setup=_edit(_fifo_steps)),
    Case("run-random-events", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/events\.bin has .*: the run file is corrupt$", inproc=True,
         setup=_edit(_random_events)),
    Case("run-schema-bool", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json: schema_version is True \(a bool\), not a schema "
         r"number: the run file is corrupt$", inproc=True,
         setup=_edit(_meta_set("schema_version", True))),
    Case("run-schema-string", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json: schema_version is '2' \(a str\)", inproc=True,
         setup=_edit(_meta_set("schema_version", "2"))),
    Case("run-schema-zero", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json: schema_version 0 is not a lazyscope run schema",
         inproc=True, setup=_edit(_meta_set("schema_version", 0))),
    Case("run-meta-array", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json holds a JSON list, not an object: the run file is "
         r"corrupt$", inproc=True,
         setup=_edit(lambda r: (r / "meta.json").write_text("[" + (r / "meta.json")
                                                             .read_text() + "]"))),
    Case("run-meta-dir", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json is not a file: the run file is corrupt$", inproc=True,
         setup=_edit(lambda r: ((r / "meta.json").unlink(), (r / "meta.json").mkdir()))),
    # -- G11: gates and options
    # a script that is not a file says what is there instead
    Case("trace-script-is-a-dir", ["trace", "--out", "{d}/R", "{d}/dir.py"], 2,
         r"lazyscope: script {d}/dir\.py is a directory, not a \.py file$", inproc=True,
         setup=lambda ctx: (ctx.d / "dir.py").mkdir(exist_ok=True)),
    Case("trace-script-symlink-loop", ["trace", "--out", "{d}/R", "{d}/a.py"], 2,
         r"lazyscope: script {d}/a\.py is a loop of symbolic links$", inproc=True,
         setup=_symlink_loop),
    # an option the chosen backend would ignore is refused, the same way for every backend
    Case("trace-device-cuda-on-xla", ["trace", "--device", "cuda", "--out", "{d}/R",
                                      "lazytensor-dynamic"], 2,
         r"lazyscope: --device cuda applies to the eager and compile backends, not to xla "
         r"\(--backend eager\)$", inproc=True),
    Case("trace-dynamic-on-eager", ["trace", "--backend", "eager", "--dynamic", "true",
                                    "--out", "{d}/R", "lazytensor-dynamic"], 2,
         r"lazyscope: --dynamic true applies to the compile backend, not to eager "
         r"\(--backend compile\)$", inproc=True),
    Case("trace-no-graph-shapes-on-compile", ["trace", "--backend", "compile",
                                              "--no-graph-shapes", "--out", "{d}/R",
                                              "lazytensor-dynamic"], 2,
         r"lazyscope: --no-graph-shapes applies to the xla backend, not to compile", inproc=True),
    # every input is read with a bound: an endless stream is refused at its first line
    Case("advise-lengths-dev-zero", ["advise", "--lengths", "/dev/zero"], 2,
         r"lazyscope: lengths file /dev/zero line 1 is longer than 64 bytes: not a length$",
         inproc=True),
    Case("check-max-step-seconds-nan", ["check", "{d}/R", "--max-step-seconds", "nan"], 2,
         r"lazyscope: Invalid value for '--max-step-seconds': 'nan' is not a number$",
         inproc=True, setup=_make_runs("R")),
    Case("check-max-step-seconds-inf", ["check", "{d}/R", "--max-step-seconds", "inf"], 0,
         None, inproc=True, setup=_make_runs("R")),
    Case("check-option-alias-twice", ["check", "{d}/R", "--max-recompiles", "0",
                                      "--max-compiles-after-warmup", "5"], 2,
         r"lazyscope: --max-recompiles 0 and --max-compiles-after-warmup 5 are one rule",
         inproc=True, setup=_make_runs("R")),
    Case("check-syncs-not-measured", ["check", "{d}/E", "--max-syncs-per-step", "0"], 2,
         r"lazyscope: --max-syncs-per-step cannot be checked: host syncs are not measured by "
         r"the eager backend on cpu", inproc=True, shared="unmeasured",
         setup=_eager_and_xla_runs),
    Case("diff-compile-vs-xla", ["diff", "{d}/E", "{d}/X", "--format", "json"], 0, None,
         inproc=True, shared="unmeasured", setup=_eager_and_xla_runs,
         extra=_no_delta_for_unmeasured),
    Case("steps-limit-swallowed", ["trace", "--out", "R", "--steps", "2",
                                   "--no-views", *EAGER, "prog.py"], 0, None, program_output=True,
         cwd="{d}", run="{d}/R", kept=2, kept_exact=True, setup=_steps_swallowed,
         extra=_checks(_says("caught 7", count=1), _limit_note)),
    Case("env-local-rank", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 0, None,
         cwd="{d}", run="{d}/R", kept=5, kept_exact=True, subenv={"LOCAL_RANK": "0"},
         setup=lambda ctx: _write(ctx, "prog.py", prog(backend="eager")),
         extra=lambda ctx, res: [] if not (ctx.d / "R" / "rank0").exists()
         else ["a lone LOCAL_RANK made the run a rank of a multi-process run"]),
]

def _own_handler(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(steps=60, sleep=0.1, backend="eager", pre="""\
import signal
signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))"""))
    p = _start(["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], ctx.d)
    _wait(lambda: _nsteps(ctx.d / "R") >= 3, p)
    p.send_signal(signal.SIGTERM)
    return _finish(p)


def _str_raises(ctx: Ctx) -> None:
    _write(ctx, "prog.py", prog(backend="eager", pre="""\
class Bad(Exception):
    def __str__(self):
        raise RuntimeError("str failed")""", hook="if i == 2:\n    raise Bad()"))


def _non_utf8_out(ctx: Ctx) -> Result:
    _write(ctx, "prog.py", prog(backend="eager"))
    out = os.fsdecode(b"R\xff")
    res = _run(["trace", "--out", out, "--no-views", *EAGER, "prog.py"], ctx.d)
    (ctx.d / "report.result").write_text(json.dumps(_inproc(["report", str(ctx.d / out)])
                                                    .__dict__))
    return res


def _reported(ctx: Ctx, res: Result) -> list[str]:
    report = _side(ctx, "report")
    return [] if report.rc == 0 and "lazyscope report:" in report.stdout else [f"report: {report}"]


#: kin the matrix found handled already: kept as rows so that they stay so
CASES_KIN: list[Case] = [
    Case("signal-own-sigterm-handler", [], 5,
         r"lazyscope: prog\.py failed: the program exited with status 143; the run so far is "
         r"kept in R \(status failed\)$", run="{d}/R", kept=3, runner=_own_handler),
    Case("end-exception-str-raises", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"],
         5, r"lazyscope: prog\.py failed: Bad: <exception str\(\) failed> \(at {d}/prog\.py:\d+\)",
         cwd="{d}", run="{d}/R", kept=3, kept_exact=True, setup=_str_raises),
    Case("nonutf8-out", [], 0, None, run="{d}/R\udcff", kept=5, kept_exact=True,
         runner=_non_utf8_out, overlap=False, extra=_reported),
    Case("out-is-file", trace_loop("--out", "{d}/F"), 3, r"lazyscope: {d}/F exists and is not a "
         r"directory$", inproc=True, setup=lambda ctx: _write(ctx, "F", "x")),
    Case("out-dev-null", trace_loop("--out", "/dev/null", "--force"), 3,
         r"lazyscope: /dev/null exists and is not a directory$", inproc=True),
    Case("out-in-proc", trace_loop("--out", "/proc/lazyscope-run"), 3,
         r"lazyscope: cannot write /proc/lazyscope-run: ", inproc=True),
    Case("run-meta-args-string", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/meta\.json has unexpected content: 'started_at' is not a string$",
         inproc=True, setup=_edit(lambda r: (_meta_set("args", "x")(r),
                                             _meta_set("started_at", 5)(r)))),
    Case("run-meta-status-bogus", ["check", "{d}/R"], 1, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_meta_set("status", "weird"))),
    Case("run-steps-dir", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/steps\.bin is not a regular file: the run file is corrupt$",
         inproc=True, setup=_edit(lambda r: ((r / "steps.bin").unlink(),
                                             (r / "steps.bin").mkdir()))),
    Case("run-event-kind-zero-first", ["report", "{d}/R"], 3,
         r"lazyscope: {d}/R/events\.bin has an empty record in the middle: the run file is "
         r"corrupt$", inproc=True, setup=_edit(lambda r: _event_step(1)(r) or _zero_kind(r))),
    Case("run-annotation-step-huge", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(lambda r: (r / "annotations.jsonl").write_text(
             '{"step": 4611686018427387904, "tokens": 5}\n'))),
    Case("run-unknown-step-field", ["report", "{d}/R"], 0, None, inproc=True, run="{d}/R",
         kept=5, setup=_edit(_meta_set("capabilities", {"step_fields": ["wall_s", "bogus"]}))),
]


# --------------------------------------------------------------------------- round 5 (issue 50)
# Writes over what is not a regular file, numbers no parser should take, runs left running by
# an error lazyscope could not describe, a run file truncated under the program, storage
# faults (tests/integration/test_bucket_faults.py holds the bucket cases), the guard, the
# pytest marker (tests/integration/test_pytest_plugin.py), damaged baselines, watch, compare.


def _special(kind: str, name: str = "out") -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        make_run(ctx.d / "R")
        path = ctx.d / name
        if os.path.lexists(path):
            return
        if kind == "chardev":  # a /dev/full of the test's own: the real one is never at risk
            os.mknod(path, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 7))
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(kind)
    return setup


def _still(kind: str, name: str = "out") -> Callable[[Ctx, Result], list[str]]:
    def check(ctx: Ctx, res: Result) -> list[str]:
        import stat as st

        mode = os.lstat(ctx.d / name).st_mode
        ok = {"chardev": st.S_ISCHR, "fifo": st.S_ISFIFO}.get(kind, st.S_ISLNK)(mode)
        return [] if ok else [f"{ctx.d / name} is no longer a {kind}: it was replaced"]
    return check


def _raises(message: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _write(ctx, "prog.py", prog(steps=3, backend="eager",
                                    post=f"raise RuntimeError({message!r})"))
    return setup


def _failed_with_error_file(ctx: Ctx, res: Result) -> list[str]:
    meta = _meta(ctx.d / "R")
    problems = [] if meta.get("status") == "failed" else [
        f"meta.json status {meta.get('status')!r}, not 'failed'"]
    if not (ctx.d / "R" / "error.txt").is_file():
        problems.append("no error.txt")
    return problems


HUGE = "9" * 400
#: the program truncates its own run's steps.bin at its 5th step, as another process would
TRUNCATES = 'if i == 4:\n    subprocess.run(["truncate", "-s", "0", "R/steps.bin"], check=True)'


def _truncated(backend: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _write(ctx, "prog.py", prog(steps=10, backend=backend, pre="import subprocess",
                                    hook=TRUNCATES))
    return setup


def _survived_truncation(ctx: Ctx, res: Result) -> list[str]:
    meta = _meta(ctx.d / "R")
    problems = [] if meta.get("status") == "ok" else [f"status {meta.get('status')!r}"]
    notes = meta.get("info", {}).get("notes", [])
    if not any("steps.bin was truncated by another process" in n for n in notes):
        problems.append(f"the run's notes do not say steps.bin was truncated: {notes}")
    return problems


#: recompiles at every step (the live alerts look), then writes garbage over its own events.bin
GARBAGE = """\
import torch, torch_xla
dev = torch_xla.device()
for i in range(8):
    x = torch.zeros(4 + i, device=dev) + 1
    torch_xla.sync()
    if i == 3:
        with open("R/events.bin", "r+b") as fh:
            fh.write(b"\\xff" * 400)
"""


def _policy_kept(ctx: Ctx, res: Result) -> list[str]:
    """The policy whose trace filled the disk (which one depends on the sizes its steps
    wrote) keeps what its line says: status no_space and those steps."""
    m = re.search(r"while writing (\S+); (\d+) steps kept$", res.stderr.strip())
    if m is None:
        return []  # filled before its first step: nothing kept, nothing to check
    run = Path(m.group(1))
    shown = _report_steps(run)
    problems = [] if _meta(run).get("status") == "no_space" else [f"{run}: not no_space"]
    if shown != int(m.group(2)):
        problems.append(f"{run}: {shown} steps loadable, the line says {m.group(2)}")
    return problems


def _live_garbage(ctx: Ctx) -> Result:
    """The trace with its live alerts on: its whole stderr is kept aside (the alerts come
    first), the last line is the case's."""
    _write(ctx, "prog.py", GARBAGE)
    res = _run(["trace", "--out", "R", "--no-views", "prog.py"], ctx.d)
    (ctx.d / "stderr.txt").write_text(res.stderr)
    last = res.stderr.strip().splitlines()[-1:] or [""]
    return Result(res.rc, res.stdout, last[0] + "\n")


def _alerts_name_the_run(ctx: Ctx, res: Result) -> list[str]:
    err = (ctx.d / "stderr.txt").read_text()
    problems = [] if f"live alerts stopped: RunDirError: {ctx.d}/R/events.bin has " in err \
        else [f"the live alerts do not say they stopped on {ctx.d}/R: {err[-600:]!r}"]
    if "/proc/self/fd" in err:
        problems.append("stderr names /proc/self/fd")
    return problems


CASES5: list[Case] = [
    # -- writes never replace what is not a regular file ---------------------------------
    Case("export-out-char-device", ["export", "{d}/R", "--out", "{d}/out"], 3,
         r"lazyscope: {d}/out is a character device: lazyscope writes a new file or replaces a "
         r"regular one, never anything else; give another path$", inproc=True,
         needs=("mknod",), setup=_special("chardev"), extra=_still("chardev")),
    Case("export-out-fifo", ["export", "{d}/R", "--out", "{d}/out"], 3,
         r"lazyscope: {d}/out is a FIFO: ", inproc=True, setup=_special("fifo"),
         extra=_still("fifo")),
    Case("export-out-symlink-to-stdout", ["export", "{d}/R", "--out", "{d}/out"], 3,
         r"lazyscope: {d}/out is a symbolic link \(to /proc/self/fd/1\): ", inproc=True,
         setup=_special("/proc/self/fd/1"), extra=_still("link")),
    Case("export-csv-out-fifo", ["export", "{d}/R", "--format", "csv", "--out", "{d}/out"], 3,
         r"lazyscope: {d}/out exists and is not a directory \(the tables are written into "
         r"one\)$", inproc=True, setup=_special("fifo"), extra=_still("fifo")),
    Case("report-html-over-a-fifo", ["report", "{d}/R", "--format", "html"], 3,
         r"lazyscope: {d}/R/report\.html is a FIFO: ", inproc=True,
         setup=_special("fifo", "R/report.html"), extra=_still("fifo", "R/report.html")),
    # -- the run's status on every exit path -------------------------------------------------
    Case("oom-with-400-digits", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 6,
         r"lazyscope: prog\.py failed: out of device memory at {d}/prog\.py:\d+: XLA runtime: "
         r"RESOURCE_EXHAUSTED; the run so far is kept in R \(status failed\)$", cwd="{d}",
         run="{d}/R", kept=3, kept_exact=True, program_output=True, extra=_failed_with_error_file,
         setup=_raises(f"RESOURCE_EXHAUSTED: Attempting to allocate {HUGE}G. That was not "
                       "possible. There are 1.00G free.")),
    Case("cuda-oom-with-400-digits", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"],
         6, r"lazyscope: prog\.py failed: out of device memory at {d}/prog\.py:\d+: CUDA: an "
         r"allocation failed, 1\.2 MiB free of 79\.2 GiB; ", cwd="{d}", run="{d}/R", kept=3,
         kept_exact=True, program_output=True, extra=_failed_with_error_file,
         setup=_raises(f"CUDA out of memory. Tried to allocate {HUGE}.00 GiB. GPU 0 has a total "
                       "capacity of 79.15 GiB of which 1.19 MiB is free.")),
    Case("quota-is-not-oom", ["trace", "--out", "R", "--no-views", *EAGER, "prog.py"], 5,
         r"lazyscope: prog\.py failed: RuntimeError: 429 RESOURCE_EXHAUSTED: Quota exceeded ",
         cwd="{d}", run="{d}/R", kept=3, kept_exact=True, program_output=True,
         extra=_failed_with_error_file,
         setup=_raises("429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Requests'")),
    # -- a run file truncated under the program: never a SIGBUS ------------------------------
    Case("steps-truncated-while-running", ["trace", "--out", "R", "--no-views", *EAGER,
                                           "prog.py"], 0, None, cwd="{d}", run="{d}/R",
         kept=10, kept_exact=True, setup=_truncated("eager"), extra=_survived_truncation),
    Case("steps-truncated-while-running-xla", ["trace", "--out", "R", "--no-views", "prog.py"],
         0, None, cwd="{d}", run="{d}/R", kept=10, kept_exact=True, setup=_truncated("xla"),
         extra=_survived_truncation),
    # -- numbers ----------------------------------------------------------------------------
    Case("watch-timeout-nan", ["watch", "{d}/R", "--timeout", "nan"], 2,
         r"lazyscope: Invalid value for '--timeout': 'nan' is not a number$", inproc=True),
    Case("advise-lengths-full-width", ["advise", "--lengths", "{d}/l.txt"], 2,
         r"lazyscope: lengths file {d}/l\.txt line 2: '\uff11\uff12' is not a whole number: "
         r"write it with the digits 0-9$", inproc=True,
         setup=lambda ctx: _write(ctx, "l.txt", "10\n\uff11\uff12\n") and None),
    Case("check-max-graph-memory-400-digits", ["check", "{d}/R", "--max-graph-memory", HUGE], 2,
         r"lazyscope: --max-graph-memory: '9{{40}}\.\.\. \(400 characters\)' has 400 digits: "
         r"too large to be a size$", inproc=True,
         setup=_make_runs("R")),
    Case("advise-max-len-huge", ["advise", "--lengths", "{d}/l.txt", "--max-len", "10" * 9], 2,
         r"lazyscope: Invalid value for '--max-len': '101010101010101010' is out of range: "
         r"from 1 to 1,048,576$", inproc=True,
         setup=lambda ctx: _write(ctx, "l.txt", "10\n20\n") and None),
    # -- storage: the spool, before anything runs (memory:// needs no server) --------------
    Case("spool-full-at-start", ["trace", "--out", "memory://b/r", *EAGER, "{s}/loop.py"], 3,
         r"lazyscope: cannot write the local spool of memory://b/r \({full}/spool/\S+\): no "
         r"space left; set LAZYSCOPE_SPOOL to a directory with room$", needs=("full",),
         subenv={"LAZYSCOPE_SPOOL": "{full}/spool"}),
    Case("compare-disk-fills-in-a-policy", ["compare", "-q", "--policies", "max,pow2", "--steps",
                                            "40", "--preset", "tiny", "--backends", "eager",
                                            "--out", "{tiny}/c", "decoder"], 3,
         r"lazyscope: eager/(max|pow2): no space left on {tiny} while writing "
         r"{tiny}/c/eager/(max|pow2)(; \d+ steps kept)?$", needs=("tiny",),
         extra=_policy_kept),
    # -- a damaged baseline is named, never compared as "0 in 0 steps" -----------------------
    Case("baseline-steps-missing", ["check", "{d}/R", "--baseline", "{d}/B"], 3,
         r"lazyscope: the baseline {d}/B cannot be compared: its files are damaged: steps\.bin "
         r"is missing: what it recorded is lost$", inproc=True,
         setup=lambda ctx: (make_run(ctx.d / "R"), make_run(ctx.d / "B"),
                            (ctx.d / "B" / "steps.bin").unlink()) and None),
    Case("baseline-old-schema-steps-missing", ["check", "{d}/R", "--baseline", "{d}/B"], 3,
         r"lazyscope: the baseline {d}/B cannot be compared: its files are damaged: "
         r"steps\.jsonl is missing: what it recorded is lost$", inproc=True,
         setup=lambda ctx: (make_run(ctx.d / "R"), shutil.copytree(
             REPO / "tests" / "data" / "v1" / "static20", ctx.d / "B"),
             (ctx.d / "B" / "steps.jsonl").unlink()) and None),
    Case("baseline-no-step", ["check", "{d}/R", "--baseline", "{d}/B"], 3,
         r"lazyscope: the baseline {d}/B cannot be compared: it holds no step \(status ok\)$",
         inproc=True, setup=lambda ctx: (make_run(ctx.d / "R"), make_run(ctx.d / "B", 0))
         and None),
    # -- the live alerts name the run, not /proc/self/fd/N ------------------------------------
    Case("live-alerts-on-a-garbage-run", [], 3,
         r"lazyscope: {d}/R/events\.bin has \d+ records? of no known kind \(kind 255\): the "
         r"run file is corrupt$", runner=_live_garbage, extra=_alerts_name_the_run),
    Case("compare-out-url", ["compare", "--out", "gs://b/c", "decoder"], 2,
         r"lazyscope: Invalid value for '--out': gs://b/c is a URL: the comparison directory is "
         r"a path on this machine$", inproc=True,
         extra=lambda ctx, res: ["a local gs: directory was made"]
         if os.path.exists("gs:") else []),
]


def _zero_kind(run: Path) -> None:
    raw = bytearray((run / "events.bin").read_bytes())
    raw[0] = 0
    (run / "events.bin").write_bytes(bytes(raw))


CASES.extend(CASES3)
CASES.extend(CASES_KIN)
CASES.extend(CASES5)

# --------------------------------------------------------------------------- the test

ROWS: list[dict[str, str]] = []
#: shared directories set up, and results of shared runs (see Case.shared)
_SET_UP: set[str] = set()
_RESULTS: dict[tuple[Any, ...], Result] = {}
_LOCKS: dict[str, threading.Lock] = {}
#: runs started ahead of their test (see _look_ahead)
_POOL = ThreadPoolExecutor(max_workers=1)
_AHEAD: dict[str, Future[Result]] = {}


@pytest.fixture(scope="module", autouse=True)
def fault_table():
    """Write what every case did as a markdown table to $LAZYSCOPE_FAULT_TABLE (if set)."""
    yield
    target = os.environ.get("LAZYSCOPE_FAULT_TABLE")
    if not target:
        return
    lines = ["| case | exit (expected) | first stderr line | steps kept | result |",
             "|---|---|---|---|---|"]
    for r in ROWS:
        cells = [r["case"], r["exit"], r["stderr"], r["kept"], r["result"]]
        cells = [c.replace(r.get("base", "\0"), "$T") for c in cells]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ")
                                       for c in cells) + " |")
    lines.append("")
    lines.append("$T: the module's temporary directory; steps kept: what `lazyscope report RUN "
                 "--format json` shows afterwards (- : no run to keep)")
    try:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError:
        pass


def _report_steps(run: Path) -> int | str:
    """Steps `lazyscope report RUN --format json` shows (run in this process), or what went
    wrong."""
    res = _inproc(["report", str(run), "--format", "json"])
    if res.rc != 0:
        return f"report exit {res.rc}: {res.stderr.strip()[-200:]}"
    try:
        return int(json.loads(res.stdout)["steps"])
    except (ValueError, KeyError, TypeError) as err:
        return f"report JSON unusable: {err}"


def _run_case(ctx: Ctx, capsys: pytest.CaptureFixture[str]) -> Result:
    case = ctx.case
    argv = [ctx.fmt(a) for a in case.argv]
    if case.runner is not None:
        return case.runner(ctx)
    if case.inproc:
        from lazyscope.cli import main

        capsys.readouterr()
        rc = main(argv)
        out, err = capsys.readouterr()
        return Result(rc, out, err)
    env = ctx.env.subprocess_env(case.user)
    env.update({k: ctx.fmt(v) for k, v in (case.subenv or {}).items()})
    cwd = Path(ctx.fmt(case.cwd)) if case.cwd else REPO
    if case.user == "nobody" and os.geteuid() == 0:
        proc = subprocess.run([*NOBODY, sys.executable, "-m", "lazyscope", *argv], cwd=cwd,
                              env={**os.environ, "PJRT_DEVICE": "CPU", **env},
                              capture_output=True, text=True, timeout=300)
        return Result(proc.returncode, proc.stdout, proc.stderr)
    return _run(argv, cwd, env=env)


def _stderr_problems(case: Case, ctx: Ctx, stderr: str) -> list[str]:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    problems = []
    if "Traceback (most recent call last)" in stderr or "Exception in thread" in stderr:
        problems.append("a Python traceback on stderr")
    if case.stderr is None or (case.allow_empty_stderr and not lines):
        if lines:
            problems.append(f"stderr is not empty: {lines[:3]}")
        return problems
    ours = lines
    if case.program_output:
        ours = lines[next((i for i, ln in enumerate(lines) if ln.startswith("lazyscope: ")),
                          len(lines)):]
    if len(ours) != 1:
        problems.append(f"stderr has {len(ours)} lines, not one: {ours[:8]}")
    if not ours or not re.match(ctx.pattern(case.stderr), ours[0]):
        problems.append(f"first stderr line {ours[0] if ours else ''!r} does not match "
                        f"{ctx.pattern(case.stderr)!r}")
    return problems


def _ctx(case: Case, env: Env) -> Ctx:
    d = env.base / ("shared" if case.shared else "cases") / (case.shared or case.name)
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o755)
    return Ctx(env, d, case)


def _outcome(case: Case, env: Env, capsys: pytest.CaptureFixture[str] | None) -> Result:
    """Set the case up and run it (a shared run once); safe from the look-ahead thread."""
    with _LOCKS.setdefault(case.shared or case.name, threading.Lock()):
        ctx = _ctx(case, env)
        if case.setup and (case.shared is None or case.shared not in _SET_UP):
            case.setup(ctx)
            _SET_UP.add(case.shared or "")
        key = (case.shared, tuple(case.argv), case.runner)
        if case.shared is not None and key in _RESULTS:
            return _RESULTS[key]
        res = _run_case(ctx, capsys)  # type: ignore[arg-type]
        _RESULTS[key] = res
        return res


def _runs_alone(case: Case, env: Env) -> bool:
    """A case the look-ahead may run while another case's test runs: a process of its own."""
    return case.overlap and not case.inproc and case.user != "nobody" and case.after is None and \
        not any(n in env.unavailable for n in case.needs)


def _look_ahead(request: pytest.FixtureRequest, env: Env) -> None:
    """Start the next selected case's run now, so that two cases' processes overlap (most of
    a case is a process starting up, or waiting on one): the module's time nearly halves."""
    items = request.session.items
    me = next((i for i, it in enumerate(items) if it.nodeid == request.node.nodeid), None)
    if me is None or me + 1 >= len(items):
        return
    nxt = items[me + 1]
    case = getattr(nxt, "callspec", None) and nxt.callspec.params.get("case")
    if isinstance(case, Case) and case.name not in _AHEAD and _runs_alone(case, env) and \
            nxt.module is request.node.module:
        _AHEAD[case.name] = _POOL.submit(_outcome, case, env, None)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault(case: Case, env: Env, capsys: pytest.CaptureFixture[str],
               request: pytest.FixtureRequest) -> None:
    row = {"case": case.name, "exit": "", "stderr": "", "kept": "", "result": "",
           "base": str(env.base)}
    ROWS.append(row)
    missing = [env.unavailable[n] for n in case.needs if n in env.unavailable]
    if missing:
        row["result"] = f"skipped: {missing[0]}"
        pytest.skip(missing[0])
    ahead = _AHEAD.pop(case.name, None)
    _look_ahead(request, env)
    res = ahead.result() if ahead is not None else _outcome(case, env, capsys)
    ctx = _ctx(case, env)
    problems: dict[str, list[str]] = {}
    expected = case.exit if isinstance(case.exit, tuple) else (case.exit,)
    if res.rc not in expected:
        problems["exit"] = [f"exit {res.rc}, expected {case.exit}; stderr: "
                            f"{res.stderr.strip()[-400:]!r}"]
    problems["stderr"] = _stderr_problems(case, ctx, res.stderr)
    if case.extra:
        problems["extra"] = case.extra(ctx, res)
    if case.after:
        case.after(ctx)
    kept: int | str = "-"
    if case.run is not None:
        kept = _report_steps(Path(ctx.fmt(case.run)))
        if not isinstance(kept, int):
            problems["kept"] = [f"the run is not loadable afterwards: {kept}"]
        elif kept < (case.kept or 0) or (case.kept_exact and kept != case.kept):
            problems["kept"] = [f"{kept} steps loadable afterwards, expected "
                                f"{'' if case.kept_exact else 'at least '}{case.kept}"]

    first = next((ln for ln in res.stderr.splitlines() if ln.strip()), "")
    row.update(exit=f"{res.rc} ({'/'.join(map(str, expected))})",
               stderr=first[:200] or "(empty)", kept=str(kept)[:120])
    problems = {k: v for k, v in problems.items() if v}
    if problems:
        row["result"] = "FAIL: " + "; ".join(p for v in problems.values() for p in v)[:300]
        pytest.fail(f"{case.name}: " + "\n".join(p for v in problems.values() for p in v))
    row["result"] = "ok"
