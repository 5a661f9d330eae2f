"""lazyscope's own streams (lazyscope.core.streams), its termination handlers (lazyscope.core.signals)
and the host values the API accepts (lazyscope.core.values): each on real descriptors and signals,
in this process."""

from __future__ import annotations

import errno
import os
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from lazyscope.core import signals
from lazyscope.core.errors import BrokenOutput, OutputError, UsageError
from lazyscope.core.streams import SafeStream
from lazyscope.core.values import host_value, host_values, note_text

# --------------------------------------------------------------------------- streams


def test_a_closed_reader_is_broken_output_once_then_silence() -> None:
    r, w = os.pipe()
    stream = SafeStream(w, "stdout", "utf-8")
    os.close(r)
    with pytest.raises(BrokenOutput):
        stream.write("x" * 100_000)
        stream.flush()
    stream.write("more")  # nothing more, no second error
    stream.flush()
    stream.close()
    os.close(w)


def test_a_full_disk_is_one_output_error() -> None:
    with open("/dev/full", "wb") as full:
        stream = SafeStream(full.fileno(), "stdout", "utf-8")
        stream.write("report\n")
        with pytest.raises(OutputError, match="cannot write to stdout: No space left on device"):
            stream.flush()
        stream.flush()  # said once
        stream.close()


def test_stderr_errors_are_dropped() -> None:
    with open("/dev/full", "wb") as full:
        stream = SafeStream(full.fileno(), "stderr", "utf-8")
        stream.write("lazyscope: a line nobody can read\n")
        stream.close()


def test_text_the_encoding_cannot_hold_is_escaped() -> None:
    r, w = os.pipe()
    stream = SafeStream(w, "stdout", "ascii")
    stream.write("caf\u00e9 \udcff\n")
    stream.flush()
    stream.close()
    os.close(w)
    assert os.read(r, 100) == b"caf\\xe9 \\udcff\n"
    os.close(r)


def test_a_copy_the_program_closed_and_reused_is_never_written(tmp_path: Path) -> None:
    """A daemon-style program closes every descriptor and opens its own files: the number of
    lazyscope's copy now names the program's file. lazyscope writes to a new copy of the
    original descriptor instead, and closes nothing of the program's."""
    r, w = os.pipe()
    stream = SafeStream(w, "stdout", "utf-8")
    mine = tmp_path / "mine.txt"
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT)
    os.dup2(fd, stream.fileno())  # the program's file takes the number
    os.close(fd)
    taken = stream.fileno()
    stream.revalidate()
    stream.write("the report\n")
    stream.flush()
    stream.close()
    os.close(w)
    assert os.read(r, 100) == b"the report\n"
    assert mine.read_bytes() == b""
    os.fstat(taken)  # the program's descriptor is still open
    os.close(taken)
    os.close(r)


# --------------------------------------------------------------------------- signals


def test_a_termination_signal_raises_terminated_and_the_default_comes_back() -> None:
    before = signal.getsignal(signal.SIGUSR2)
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    try:
        with pytest.raises(signals.Terminated) as info:
            with signals.handlers():
                os.kill(os.getpid(), signal.SIGUSR2)
                for _ in range(1000):  # the handler runs between bytecodes
                    pass
        assert info.value.signum == signal.SIGUSR2 and str(info.value) == "terminated by SIGUSR2"
        assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_an_ignored_or_handled_signal_is_left_alone() -> None:
    saved = signal.getsignal(signal.SIGUSR2)

    def mine(signum, frame):  # noqa: ANN001
        pass

    try:
        for disposition in (signal.SIG_IGN, mine):
            signal.signal(signal.SIGUSR2, disposition)
            with signals.handlers():
                assert signal.getsignal(signal.SIGUSR2) is disposition
    finally:
        signal.signal(signal.SIGUSR2, saved)


def test_a_signal_is_held_back_while_a_run_is_finalised() -> None:
    saved = signal.getsignal(signal.SIGUSR2)
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    finished = False
    try:
        with signals.handlers(), pytest.raises(signals.Terminated):
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGUSR2)
                for _ in range(1000):
                    pass
                finished = True
        assert finished
    finally:
        signal.signal(signal.SIGUSR2, saved)


# --------------------------------------------------------------------------- host values


def test_plain_values_are_kept_and_host_objects_converted() -> None:
    assert host_values("api", {"n": 3, "x": 0.5, "s": "a", "b": True, "none": None,
                               "l": (1, [2, 3]), "d": {1: "one"}}) == \
        {"n": 3, "x": 0.5, "s": "a", "b": True, "none": None, "l": [1, [2, 3]],
         "d": {"1": "one"}}
    assert host_value("api", "v", np.int64(7)) == 7 and host_value("api", "v", np.arange(3)) \
        == [0, 1, 2]
    assert host_value("api", "p", Path("/a/b")) == "/a/b"
    assert host_value("api", "f", float("nan")) == "nan"


def test_a_tensor_is_refused_and_never_read() -> None:
    class Unreadable(torch.Tensor):
        def __str__(self) -> str:  # reading it would fail the test
            raise AssertionError("read")

    t = torch.ones(2).as_subclass(Unreadable)
    with pytest.raises(UsageError, match=r"lazyscope\.annotate_step\(loss=\.\.\.\): a torch "
                                         r"tensor is not a host value.*loss=t\.item\(\)"):
        host_value("lazyscope.annotate_step", "loss", t)
    with pytest.raises(UsageError, match="a torch tensor"):
        host_value("api", "nested", {"k": [t]})
    with pytest.raises(UsageError, match="a torch tensor"):
        note_text(t)


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("step", 3, "'step' is reserved"),
    ("w", object(), "'object' is not a plain value"),
    ("big", "x" * (100 << 10), "bytes as JSON; at most"),
])
def test_what_cannot_be_recorded_is_refused(name, value, needle) -> None:
    with pytest.raises(UsageError, match=needle.replace("(", r"\(")):
        host_value("api", name, value)


# --------------------------------------------------------------------------- helpers


def test_errno_reasons_are_words() -> None:
    from lazyscope.core.errors import one_line, os_reason, show_path

    assert os_reason(OSError(errno.ENAMETOOLONG, "x")) == "the name is too long"
    assert show_path(os.fsdecode(b"a\xff\nb")) == "a\\xff\\nb"
    assert len(show_path("/" + "y" * 5000)) < 500
    assert one_line("x" * 5000).endswith("(5000 characters)")
    assert tempfile.gettempdir()
