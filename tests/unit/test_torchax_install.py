"""torch_xla 2.9.0's wheel carries an older ``torchax`` package; installed after torchax 0.0.13 it
overwrites torchax's files (its ``checkpoint.py`` imports flax). A torchax trace says so in one
line (exit 4) instead of crashing inside ``import torchax``. The installed files are laid out here
as pip lays them out (a dist-info with a RECORD of sha256 hashes), in a fresh interpreter."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

OWN = b"# torchax 0.0.13's own __init__\n"
BUNDLED = b"from flax.training import checkpoints\n"


def _site(tmp_path: Path, init: bytes) -> Path:
    site = tmp_path / "site"
    (site / "torchax").mkdir(parents=True)
    (site / "torchax" / "__init__.py").write_bytes(init)
    info = site / "torchax-0.0.13.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchax\nVersion: 0.0.13\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(OWN).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"torchax/__init__.py,sha256={digest},{len(OWN)}\n"
                                 "torchax-0.0.13.dist-info/RECORD,,\n")
    return site


def _run(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(repo)])}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=site)


CHECK = ("from lazyscope.backends.torchax.collector import overwritten_torchax;"
         "print(overwritten_torchax())")


def test_torchax_s_own_files_pass(tmp_path: Path) -> None:
    proc = _run(_site(tmp_path, OWN), CHECK)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"


def test_torch_xla_s_copy_is_named_with_the_reinstall(tmp_path: Path) -> None:
    proc = _run(_site(tmp_path, BUNDLED), CHECK)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert "torchax/__init__.py was overwritten" in line
    assert "pip install --force-reinstall --no-deps torchax==0.0.13" in line


def test_a_torchax_trace_refuses_in_one_line_with_exit_4(tmp_path: Path) -> None:
    site = _site(tmp_path, BUNDLED)
    script = tmp_path / "prog.py"
    script.write_text("print('ran')\n")
    proc = _run(site, "import sys; from lazyscope.cli import main; sys.exit(main(["
                      f"'trace', '--backend', 'torchax', '--out', {str(tmp_path / 'run')!r}, "
                      f"'--no-views', '-q', {str(script)!r}]))")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "ran" not in proc.stdout
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--force-reinstall --no-deps torchax==0.0.13" in lines[0], lines
