"""`lazyscope diff before after` after the script was edited in place: the same code at new
line numbers is reported as moved, not as sites that disappeared and appeared (real torch_xla
on the CPU, two traces of one path, the file rewritten in between)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import lazyscope_cmd

pytestmark = [pytest.mark.xla, pytest.mark.slow]

SCRIPT = textwrap.dedent("""\
    import torch, torch_xla

    def main():
        dev = torch_xla.device()
        w = torch.ones(8, 8, device=dev)
        for step in range(6):
            x = torch.randn(4 + step, 8).to(dev)       # a new shape every step: a recompile finding
            loss = (x @ w).sum()
            print(loss.item())                          # a host sync every step
            torch_xla.sync()

    main()
    """)


def test_diff_follows_lines_that_moved(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    before, after = tmp_path / "before", tmp_path / "after"
    proc = lazyscope_cmd("trace", "--no-views", "--out", str(before), str(script))
    assert proc.returncode == 0, proc.stderr
    script.write_text("# tuned the model\nimport os\n\n" + SCRIPT)  # everything 3 lines down
    proc = lazyscope_cmd("trace", "--no-views", "--out", str(after), str(script))
    assert proc.returncode == 0, proc.stderr

    proc = lazyscope_cmd("diff", str(before), str(after), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    (moved,) = d["sync_sites"]["moved"]
    assert moved["moved_from"] == f"{script}:9" and moved["site"] == f"{script}:12"
    assert moved["text"] == "print(loss.item())                          # a host sync every step"
    assert moved["a"] == moved["b"] == 6
    for kind in ("sync_sites", "compile_sites"):
        assert d[kind]["appeared"] == [] and d[kind]["disappeared"] == [], d[kind]
    assert d["compile_sites"]["moved"]  # the barrier, line 10 -> 13
    assert d["findings"]["appeared"] == [] and d["findings"]["disappeared"] == []
    assert any(f.startswith("recompile at ") and " -> " in f for f in d["findings"]["moved"])

    text = lazyscope_cmd("diff", str(before), str(after)).stdout
    assert f"  > {script}:12  (moved from {script}:9; 6)  print(loss.item())  " in text
    assert "findings:\n  > recompile at" in text
