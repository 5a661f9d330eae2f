"""What a terminal shows while lazyscope works, against what a pipe gets: `lazyscope trace` and
`lazyscope compare` run in a real pseudo-terminal (the pty module), real torch_xla on the CPU.

On a terminal: a live progress line on stderr (the step of the limit, steps per second,
compilations so far, the last step's time, the elapsed time) and the findings in colour; the
traced program sees its own streams as terminals and may close its stdout. Piped, with
NO_COLOR, with --quiet, and in --format json: no escape code at all (NO_COLOR keeps the live
line, uncoloured).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
import textwrap
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO, lazyscope_cmd

pytestmark = [pytest.mark.xla, pytest.mark.slow]

ESC = "\x1b["


def final_line(steps: str) -> re.Pattern[str]:
    """The live line's text once the run has ended (its last frame stays on screen)."""
    return re.compile(rf"step {steps} \S+ [\d.]+ steps/s · (\d+) compiles? · last \d+ ms "
                      r"\d:\d\d:\d\d")

PROGRAM = textwrap.dedent("""\
    import os, sys
    import torch, torch_xla
    open(os.environ["ISATTY_OUT"], "w").write(f"{sys.stdout.isatty()} {sys.stderr.isatty()}")
    dev = torch_xla.device()
    w = torch.ones(8, 8, device=dev)
    for step in range(6):
        x = torch.randn(4 + step, 8).to(dev)       # a new shape every step: recompiles
        y = (x @ w).sum()
        torch_xla.sync()
        print(f"program step {step}", flush=True)
    if os.environ.get("CLOSE_STDOUT"):
        sys.stdout.close()                          # the program's business, not lazyscope's
""")


def in_terminal(argv: list[str], env: dict[str, str], cols: int = 100) -> tuple[int, str]:
    """Run ``python -m lazyscope ARGV`` with stdout and stderr on a pseudo-terminal of ``cols``
    columns; return its exit code and everything the terminal received."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "lazyscope", *argv], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env={**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(REPO),
                                 "TERM": "xterm-256color", **env})
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=600)
    reader.join(timeout=30)
    os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def colours(text: str) -> set[int]:
    """The colour codes (foreground and background) among the SGR sequences of ``text``."""
    found = set()
    for params in re.findall(r"\x1b\[([0-9;]*)m", text):
        found |= {int(p) for p in params.split(";") if p.isdigit() and
                  (30 <= int(p) <= 49 or 90 <= int(p) <= 107)}
    return found


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("terminal") / "train.py"
    path.write_text(PROGRAM)
    return path


def test_trace_on_a_terminal_shows_progress_and_colour(program: Path, tmp_path: Path) -> None:
    seen = tmp_path / "isatty.txt"
    # a limit above the program's 6 steps: the program runs to its end (and closes stdout)
    code, screen = in_terminal(["trace", "--steps", "8", "--out", str(tmp_path / "run"),
                                "--no-views", str(program)],
                               {"ISATTY_OUT": str(seen), "CLOSE_STDOUT": "1"})
    assert code == 0, plain(screen)[-3000:]
    assert seen.read_text() == "True True"  # the program's streams are the terminal itself
    text = plain(screen)
    frames = [f for f in re.split(r"[\r\n]", text) if "steps/s" in f or "starting" in f]
    assert any("step 0/8" in f and "starting" in f for f in frames), frames[:3]
    final = final_line("6/8").search(text)
    assert final and int(final.group(1)) >= 3, frames[-3:]  # compilations so far
    assert "program step 5" in text  # the program's own output reaches the terminal
    assert "\x1b[2K" in screen  # the line is redrawn in place
    assert colours(screen)
    # the finding's header in its kind's colour (recompile: bold red); the verdict in yellow
    assert re.search(r"\x1b\[1;31m  1\. \[recompile\] ", screen)
    assert re.search(r"\x1b\[1;33mverdict: ", screen)
    assert "run saved in" in text  # printed although the program closed its stdout


def test_no_color_and_quiet(program: Path, tmp_path: Path) -> None:
    env = {"ISATTY_OUT": str(tmp_path / "isatty.txt")}
    code, screen = in_terminal(["trace", "--steps", "4", "--out", str(tmp_path / "a"),
                                "--no-views", str(program)], {**env, "NO_COLOR": "1"})
    assert code == 0
    assert final_line("4/4").search(plain(screen))  # the live line is still drawn ...
    assert not colours(screen)  # ... without a colour (bold is not one)
    code, screen = in_terminal(["trace", "--quiet", "--steps", "4", "--out",
                                str(tmp_path / "b"), "--no-views", str(program)], env)
    assert code == 0 and ESC not in screen and "steps/s" not in screen
    assert "verdict: " in screen


def test_piped_has_no_progress_and_no_escape_codes(program: Path, tmp_path: Path) -> None:
    proc = lazyscope_cmd("trace", "--steps", "4", "--out", str(tmp_path / "run"), "--no-views",
                         str(program), env={"ISATTY_OUT": str(tmp_path / "isatty.txt")})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "isatty.txt").read_text() == "False False"
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "steps/s" not in proc.stderr and "verdict: " in proc.stdout
    report = lazyscope_cmd("report", str(tmp_path / "run"), "--format", "json")
    assert json.loads(report.stdout)["steps"] == 4 and "\x1b" not in report.stdout


def test_compare_on_a_terminal_shows_each_policy(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code, screen = in_terminal(["compare", "--policies", "max,packed", "--steps", "2",
                                "--mode", "train", "--out", str(out), "--format", "json",
                                "decoder", "--max-len", "32", "--batch", "4"], {}, cols=110)
    assert code == 0, plain(screen)[-3000:]
    text = plain(screen)
    # a line per policy with its steps of the limit, and the whole comparison's elapsed time
    assert re.search(r"max\s+\S+ 2/2 done \d:\d\d:\d\d", text), text[-2000:]
    assert re.search(r"packed\s+\S+ 2/2 done \d:\d\d:\d\d", text)
    assert re.search(r"compare decoder\s+\S+ 2/2 done \d:\d\d:\d\d", text)
    assert "[1/2] max " in text and "[2/2] packed " in text  # each case's summary line
    data = json.loads(text[text.index("{"):])  # --format json: the JSON alone, after the lines
    assert [r["policy"] for r in data["rows"]] == ["max", "packed"]

