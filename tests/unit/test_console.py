"""The pieces behind the live progress lines: what the recorder counts for them, compare's
progress channel, and when lines and colours are wanted. (The terminal itself is exercised in
tests/integration/test_terminal.py, in a real pseudo-terminal.)"""

from __future__ import annotations

import math
import os

import pytest

from lazyscope.backends.base import Recorder
from lazyscope.commands.console import (
    ProgressPipe,
    TraceProgress,
    colour_wanted,
    live_wanted,
    print_report,
    read_progress,
)
from lazyscope.model import Meta
from lazyscope.store import RunWriter


def test_recorder_counts_compilations_and_the_last_step(tmp_path) -> None:
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    rec.step({"wall_s": 0.5, "compile_count": 2})
    rec.step({"wall_s": 0.25, "compile_count": math.nan})  # not measured: no compilation
    rec.step({"wall_s": None, "compile_count": None})
    assert rec.steps == 3 and rec.compiles == 2 and rec.last_wall_s is None
    rec.step({"wall_s": 0.125, "compile_count": 1.0})
    assert rec.compiles == 3 and rec.last_wall_s == 0.125


def test_progress_pipe_sends_steps_and_compilations(tmp_path) -> None:
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    read_end, write_end = os.pipe()
    pipe = ProgressPipe(write_end, every=0.0)
    pipe.attach(rec)
    rec.step({"wall_s": 0.1, "compile_count": 1})
    rec.step({"wall_s": 0.1, "compile_count": 0})
    pipe.close()  # the last count is always sent, then the descriptor is closed
    with os.fdopen(read_end) as f:
        lines = f.read().splitlines()
    assert [read_progress(line) for line in lines] == [(1, 1), (2, 1)]


def test_progress_pipe_sends_the_last_step_when_throttled(tmp_path) -> None:
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    read_end, write_end = os.pipe()
    pipe = ProgressPipe(write_end, every=3600)
    pipe.attach(rec)
    for _ in range(5):
        rec.step({"wall_s": 0.1, "compile_count": 1})
    pipe.close()
    with os.fdopen(read_end) as f:
        assert [read_progress(line) for line in f.read().splitlines()] == [(1, 1), (5, 5)]


def test_progress_pipe_without_a_reader_is_silent(tmp_path) -> None:
    rec = Recorder(RunWriter(tmp_path / "r", Meta(target="t")))
    read_end, write_end = os.pipe()
    os.close(read_end)  # compare went away
    pipe = ProgressPipe(write_end, every=0.0)
    pipe.attach(rec)
    rec.step({"wall_s": 0.1, "compile_count": 1})  # EPIPE: swallowed, the program goes on
    assert pipe.fd == -1
    pipe.close()


@pytest.mark.parametrize("line", ["", "3", "a b", "1 2 3", "-1 2"])
def test_malformed_progress_lines_are_ignored(line) -> None:
    assert read_progress(line) is None


def test_nothing_live_or_coloured_off_a_terminal(monkeypatch, capsys) -> None:
    # under pytest neither stream is a terminal
    assert not live_wanted() and not colour_wanted()
    with TraceProgress(10, enabled=live_wanted()) as live:
        live.attach(object())  # disabled: attaches nothing
    text = "findings (1):\n  1. [recompile] a.py:3 x2, ~1 s\n     fix: pad\n\nverdict: x\n"
    print_report(text, clean=False, colour=False, echo=lambda t: print(t, end=""))
    assert capsys.readouterr().out == text


def test_trace_progress_line(monkeypatch) -> None:
    live = TraceProgress(20, enabled=False)
    assert live._fields(0) == {"step": "step 0/20", "info": "starting · 0 compiles"}
    assert live._fields(3, 1, 0.245, 4.12) == {
        "step": "step 3/20", "info": "4.1 steps/s · 1 compile · last 245 ms"}
    assert TraceProgress(None, enabled=False)._fields(7, 2, 1.5)["step"] == "step 7"


def test_tpu_chips_are_found_by_pci_id_not_by_dev_accel(tmp_path) -> None:
    """A TPU VM / Colab TPU runtime: Google's vendor id with a TPU device id. Google's virtual
    NIC (same vendor, device 0x0042) and an NVIDIA GPU (which creates /dev/accel* too) are not
    TPUs."""
    from lazyscope.backends.xla.runtime import tpu_chips

    def device(name: str, vendor: str, dev: str) -> None:
        d = tmp_path / name
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text(dev + "\n")

    device("0000:00:04.0", "0x1ae0", "0x0042")  # gVNIC
    device("0000:00:05.0", "0x10de", "0x2330")  # NVIDIA H100
    assert tpu_chips(str(tmp_path)) == 0
    device("0000:00:06.0", "0x1ae0", "0x0063")  # TPU v5e
    device("0000:00:07.0", "0x1ae0", "0x0063")
    assert tpu_chips(str(tmp_path)) == 2
    assert tpu_chips(str(tmp_path / "missing")) == 0
