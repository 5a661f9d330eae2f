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
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd

pytestmark = pytest.mark.xla

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

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
        env = {"PYTHONPATH": str(REPO)}
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
    e.paths.update(ro=str(ro), full=str(full), fill=str(fill))
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
    os.truncate(steps, 4 * 120 + 50)  # 4 whole records and half of the 5th


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

# --------------------------------------------------------------------------- the test

ROWS: list[dict[str, str]] = []


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
    """Steps `lazyscope report RUN --format json` shows, or what went wrong."""
    proc = lazyscope_cmd("report", str(run), "--format", "json")
    if proc.returncode != 0:
        return f"report exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    try:
        return int(json.loads(proc.stdout)["steps"])
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
    else:
        proc = lazyscope_cmd(*argv, cwd=cwd, env=env, timeout=300)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _stderr_problems(case: Case, ctx: Ctx, stderr: str) -> list[str]:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    problems = []
    if "Traceback (most recent call last)" in stderr or "Exception in thread" in stderr:
        problems.append("a Python traceback on stderr")
    if case.stderr is None:
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


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault(case: Case, env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    row = {"case": case.name, "exit": "", "stderr": "", "kept": "", "result": "",
           "base": str(env.base)}
    ROWS.append(row)
    missing = [env.unavailable[n] for n in case.needs if n in env.unavailable]
    if missing:
        row["result"] = f"skipped: {missing[0]}"
        pytest.skip(missing[0])
    d = env.base / "cases" / case.name
    d.mkdir(parents=True)
    d.chmod(0o755)
    ctx = Ctx(env, d, case)
    if case.setup:
        case.setup(ctx)

    res = _run_case(ctx, capsys)
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
