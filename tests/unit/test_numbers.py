"""The one parser of numbers a user or the environment gives (lazyscope/core/numbers.py): ASCII
digits only, bounded digit counts, no NaN or infinity where a finite value is meant, bounds
said in the line; and every option and variable that takes a number goes through it."""

from __future__ import annotations

import math

import pytest

from lazyscope.cli import main
from lazyscope.core.errors import EXIT_USAGE, UsageError
from lazyscope.core.numbers import (
    BadNumber,
    parse_float,
    parse_int,
    parse_size,
    parse_size_or_share,
)

FULL_WIDTH = "\uff11\uff12"  # １２
ARABIC_INDIC = "\u0663\u0664"  # ٣٤
SUPERSCRIPT = "\u00b2"  # ²
HUGE = "9" * 400


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("12", 12), (" 7 ", 7), ("+3", 3),
                                             ("-4", -4)])
def test_whole_numbers(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize(("text", "why"), [
    (FULL_WIDTH, "is not a whole number: write it with the digits 0-9"),
    (ARABIC_INDIC, "is not a whole number: write it with the digits 0-9"),
    (SUPERSCRIPT, "is not a whole number: write it with the digits 0-9"),
    (HUGE, "has 400 digits: too large"),
    ("1.5", "is not a whole number"),
    ("abc", "is not a whole number"),
    ("nan", "is not a number"),
    ("inf", "is not a whole number: a finite value is needed"),
    ("", "an empty value is not a whole number"),
])
def test_whole_numbers_refused(text: str, why: str) -> None:
    with pytest.raises(BadNumber) as err:
        parse_int(text, "--x")
    assert str(err.value).startswith("--x: ") and why in str(err.value)
    assert isinstance(err.value, UsageError) and isinstance(err.value, ValueError)
    assert len(str(err.value)) < 200  # a 400-digit number is shown by its length


def test_bounds_are_said() -> None:
    with pytest.raises(BadNumber, match=r"'-1' is out of range: from 0 to 1,048,576"):
        parse_int("-1", "CLOUD_TPU_TASK_ID", minimum=0, maximum=1 << 20)
    with pytest.raises(BadNumber, match=r"'0' is out of range: at least 1"):
        parse_int("0", minimum=1)
    assert parse_int("1048576", maximum=1 << 20) == 1 << 20


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("2", 2.0), ("1e-3", 1e-3),
                                             (".5", 0.5), ("3.", 3.0)])
def test_real_numbers(text: str, value: float) -> None:
    assert parse_float(text) == value


@pytest.mark.parametrize(("text", "why"), [
    ("nan", "is not a number"), ("NaN", "is not a number"),
    ("inf", "a finite value is needed"), ("-Infinity", "a finite value is needed"),
    ("1e309", "is too large: a finite value is needed"),
    (HUGE, "has 400 digits: too large"),
    (FULL_WIDTH, "write it with the digits 0-9"),
    ("1e99999", "is not a number"),
    ("0x10", "is not a number"),
])
def test_real_numbers_refused(text: str, why: str) -> None:
    with pytest.raises(BadNumber, match="^LAZYSCOPE_UPLOAD_SECONDS: ") as err:
        parse_float(text, "LAZYSCOPE_UPLOAD_SECONDS")
    assert why in str(err.value)


def test_infinity_only_where_a_limit_may_never_bind() -> None:
    assert parse_float("inf", infinite=True) == math.inf
    with pytest.raises(BadNumber, match="is not a number"):
        parse_float("nan", infinite=True)
    with pytest.raises(BadNumber, match="is not above 0"):
        parse_float("0", above=0)


@pytest.mark.parametrize(("text", "value"), [
    ("1MB", 10 ** 6), ("16GiB", 16 << 30), ("512K", 512 << 10), ("4096", 4096),
    ("1.5KiB", 1536), ("80%", 0.8)])
def test_sizes(text: str, value: float) -> None:
    got = parse_size_or_share(text)
    assert (got[1] if text.endswith("%") else got[0]) == value


@pytest.mark.parametrize("text", [HUGE, HUGE + "GiB", FULL_WIDTH + "MB", "nan", "inf",
                                  "-1MB", "12x", "0%", "150%", "nan%"])
def test_sizes_refused(text: str) -> None:
    with pytest.raises(BadNumber, match="^--max-graph-memory: "):
        parse_size_or_share(text, "--max-graph-memory")


def test_a_size_of_many_digits_is_exact() -> None:
    assert parse_size("9" * 30) == int("9" * 30)


# ---- every option and variable that takes a number: one line, exit 2 -----------------------

def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lazyscope: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("argv", "needle"), [
    (["watch", "R", "--timeout", "nan"], "'--timeout': 'nan' is not a number"),
    (["watch", "R", "--timeout", "1e309"], "'--timeout': '1e309' is too large"),
    (["watch", "R", "--every", "-1"], "'--every': '-1' is out of range"),
    (["advise", "--lengths", "L", "--max-len", HUGE], "'--max-len': "),
    (["advise", "--lengths", "L", "--max-len", "99999999999"], "from 1 to 1,048,576"),
    (["advise", "--lengths", "L", "--batch", "100000000000000000000"], "from 1 to 4,096"),
    (["advise", "--lengths", "L", "--max-len", FULL_WIDTH], "write it with the digits 0-9"),
    (["advise", "--lengths", "L", "--device-memory", HUGE], "--device-memory: "),
    (["check", "R", "--max-graph-memory", HUGE], "--max-graph-memory: "),
    (["check", "R", "--max-graph-memory", FULL_WIDTH + "GiB"], "digits 0-9"),
    (["check", "R", "--max-recompiles", ARABIC_INDIC], "'--max-recompiles': "),
    (["trace", "--steps", HUGE, "x.py"], "'--steps': "),
    (["report", "R", "--warmup-steps", "-1"], "'--warmup-steps': '-1' is out of range"),
])
def test_options_refuse_numbers_in_one_line(argv: list[str], needle: str, tmp_path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("3\n5\n200\n")
    argv = [str(lengths) if a == "L" else str(tmp_path / "R") if a == "R" else a for a in argv]
    assert main(argv) == EXIT_USAGE
    assert needle in _one_line(capsys)


@pytest.mark.parametrize("text", [FULL_WIDTH, ARABIC_INDIC, "9" * 40, "-3", "0", "2000000"])
def test_lengths_in_a_file_or_on_stdin(text: str, tmp_path, monkeypatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import sys

    f = tmp_path / "lengths.txt"
    f.write_text(f"12\n{text}\n")
    assert main(["advise", "--lengths", str(f)]) == EXIT_USAGE
    assert f"lengths file {f} line 2: " in _one_line(capsys)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"12\n{text}\n".encode())))
    assert main(["advise", "--lengths", "-"]) == EXIT_USAGE
    assert "lengths file standard input line 2: " in _one_line(capsys)


@pytest.mark.parametrize("value", ["abc", "-1", SUPERSCRIPT, FULL_WIDTH, HUGE, "1.0"])
def test_a_host_index_from_the_environment(value: str, monkeypatch) -> None:
    from lazyscope.backends.hosts import host_index

    monkeypatch.setenv("CLOUD_TPU_TASK_ID", value)
    with pytest.raises(BadNumber, match=r"^CLOUD_TPU_TASK_ID \(the host index\): "):
        host_index()
    monkeypatch.setenv("CLOUD_TPU_TASK_ID", "3")
    assert host_index() == 3
    monkeypatch.delenv("CLOUD_TPU_TASK_ID")
    monkeypatch.setenv("TPU_WORKER_ID", "-1")
    with pytest.raises(BadNumber, match=r"^TPU_WORKER_ID \(the host index\): '-1' is out of "):
        host_index()


@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "0", "-2", FULL_WIDTH, HUGE])
def test_the_upload_period_from_the_environment(value: str, monkeypatch) -> None:
    from lazyscope.store.remote import UPLOAD_SECONDS, upload_seconds

    monkeypatch.setenv("LAZYSCOPE_UPLOAD_SECONDS", value)
    with pytest.raises(BadNumber, match="^LAZYSCOPE_UPLOAD_SECONDS: "):
        upload_seconds()
    monkeypatch.setenv("LAZYSCOPE_UPLOAD_SECONDS", "0.3")
    assert upload_seconds() == 0.3
    monkeypatch.setenv("LAZYSCOPE_UPLOAD_SECONDS", "0.001")
    assert upload_seconds() == 0.05
    monkeypatch.delenv("LAZYSCOPE_UPLOAD_SECONDS")
    assert upload_seconds() == UPLOAD_SECONDS


@pytest.mark.parametrize(("text", "why"), [
    (f"{FULL_WIDTH}:5", f"--profile-steps must be two whole numbers A:B: '{FULL_WIDTH}' is not a "
                        "whole number: write it with the digits 0-9"),
    (f"1:{HUGE[:40]}", "has 40 digits: too large"),
    ("-1:3", "--profile-steps A:B needs 0 <= A < B, got '-1:3'"),
])
def test_profile_steps(text: str, why: str) -> None:
    from lazyscope.backends.profiling import parse_profile_steps

    with pytest.raises(UsageError) as err:
        parse_profile_steps(text)
    assert why in str(err.value)
    assert parse_profile_steps("2:5") == (2, 5)


@pytest.mark.parametrize("text", [FULL_WIDTH, "0", HUGE])
def test_the_notebook_magic_steps(text: str) -> None:
    from lazyscope.integrations.jupyter import parser

    with pytest.raises(UsageError, match="^%%lazyscope: argument --steps: "):
        parser().parse_args(["--steps", text])
    assert parser().parse_args(["--steps", "3"]).steps == 3
