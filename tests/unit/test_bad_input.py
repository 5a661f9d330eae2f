"""The bad-input matrix, in-process: each case is one ``lazyscope: ...`` line on stderr, no
traceback, the documented exit code (lazyscope/core/errors.py, docs/faults.md), and nothing recorded is lost.

Cases already in test_cli.py (unknown scenario, missing/unparsable script, --steps -3, a bad
--mode choice, an unknown backend, an existing --out) are not repeated here.
"""

from __future__ import annotations

import json

import pytest

from lazyscope.cli import main
from lazyscope.core.errors import EXIT_RUN_DIR, EXIT_USAGE


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lazyscope: ") and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--steps", "0"], "bad arguments for scenario lazytensor-dynamic: argument --steps: "
                           "must be at least 1, got 0"),
        (["--size", "abc"], "bad arguments for scenario lazytensor-dynamic: argument --size: "
                            "invalid int value: 'abc'"),
        (["--", "--steps", "-1"], "argument --steps: must be at least 1, got -1"),
        (["--mode"], "argument --mode: expected one argument"),
    ],
)
def test_bad_scenario_option_values(capsys, tmp_path, args, needle) -> None:
    out = tmp_path / "run"
    assert main(["trace", "--out", str(out), "lazytensor-dynamic", *args]) == EXIT_USAGE
    assert needle in one_line(capsys)
    assert not out.exists()  # validated before anything was written


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--padding", "bucket:64,abc"], "malformed bucket list 'bucket:64,abc'"),
        (["--padding", "bucket:0,64"], "bucket sizes must be >= 1"),
        (["--padding", "diagonal"], "unknown padding policy 'diagonal'"),
        (["--max-buckets", "0"], "argument --max-buckets: must be at least 1, got 0"),
        (["--lengths", "LONG"], "--lengths holds length 300 > max length 256"),
        (["--lengths", "/no/such/lengths.txt"], "cannot read lengths file /no/such/lengths.txt"),
    ],
)
def test_bad_decoder_option_values(capsys, tmp_path, args, needle) -> None:
    """Bucket lists, K < 1 and lengths files are checked before anything runs or is written."""
    long_file = tmp_path / "lengths.txt"
    long_file.write_text("10\n300\n")
    args = [str(long_file) if a == "LONG" else a for a in args]
    out = tmp_path / "run"
    assert main(["trace", "--out", str(out), "decoder", *args]) == EXIT_USAGE
    line = one_line(capsys)
    assert line.startswith("lazyscope: bad arguments for scenario decoder: ") and needle in line
    assert not out.exists()


def test_script_path_is_a_directory(capsys, tmp_path) -> None:
    d = tmp_path / "scripts.py"
    d.mkdir()
    assert main(["trace", str(d)]) == EXIT_USAGE
    assert "is a directory, not a .py file" in one_line(capsys)  # what is there instead


def test_script_not_utf8(capsys, tmp_path) -> None:
    script = tmp_path / "latin1.py"
    script.write_bytes(b"x = '\xe9'\n")
    assert main(["trace", str(script)]) == EXIT_USAGE
    assert f"cannot read script {script}" in one_line(capsys)


def test_force_never_replaces_a_directory_that_is_not_a_run(capsys, tmp_path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("years of work")
    assert main(["trace", "--out", str(precious), "--force", "lazytensor-dynamic"]) == EXIT_RUN_DIR
    assert "is not a lazyscope run; refusing to replace it" in one_line(capsys)
    assert (precious / "chapter1.tex").read_text() == "years of work"


def test_out_is_a_file(capsys, tmp_path) -> None:
    f = tmp_path / "run"
    f.write_text("x")
    assert main(["trace", "--out", str(f), "lazytensor-dynamic"]) == EXIT_RUN_DIR
    assert "exists and is not a directory" in one_line(capsys)


def test_force_with_bad_arguments_keeps_the_old_run(capsys, data_run) -> None:
    path = data_run("static20")
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    assert main(["trace", "--out", str(path), "--force", "lazytensor-dynamic",
                 "--mode", "sideways"]) == EXIT_USAGE
    one_line(capsys)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before


@pytest.mark.parametrize("command", [["report"], ["report", "--format", "json"], ["check"]])
def test_a_hole_in_the_middle_of_steps(capsys, data_run, command) -> None:
    path = data_run("dynamic20")
    data = bytearray((path / "steps.bin").read_bytes())
    data[5 * 120:6 * 120] = bytes(120)  # step 5's record zeroed
    (path / "steps.bin").write_bytes(bytes(data))
    assert main([command[0], str(path), *command[1:]]) == EXIT_RUN_DIR
    assert "steps.bin has an empty record in the middle: the run file is corrupt" in one_line(
        capsys)


def test_corrupt_intern_entry(capsys, data_run) -> None:
    path = data_run("dynamic20")
    lines = (path / "intern.jsonl").read_bytes().splitlines(keepends=True)
    lines[2] = b"\x00\xff garbage\n"
    (path / "intern.jsonl").write_bytes(b"".join(lines))
    assert main(["report", str(path)]) == EXIT_RUN_DIR
    assert "intern.jsonl line 3 is not a valid entry: the run file is corrupt" in one_line(capsys)


def test_a_step_value_that_is_not_a_number(capsys, data_run) -> None:
    """NaN / inf bytes in a measured field: counted as 0, with a warning; never a crash."""
    import struct

    path = data_run("dynamic20")
    data = bytearray((path / "steps.bin").read_bytes())
    data[3 * 120 + 16:3 * 120 + 24] = struct.pack("<d", float("inf"))  # step 3's wall_s
    (path / "steps.bin").write_bytes(bytes(data))
    assert main(["report", str(path)]) == 0
    assert "1 measured value was not a number" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda m: m.write_text('{"status": "ok", '), "meta.json is not valid JSON"),
        (lambda m: m.unlink(), "is not a lazyscope run: it has no meta.json"),
        (lambda m: m.write_text(json.dumps({**json.loads(m.read_text()), "schema_version": 99})),
         "was written with run schema 99, newer than this lazyscope understands (3); "
         "upgrade lazyscope to read it"),
        (lambda m: m.write_text(json.dumps({**json.loads(m.read_text()), "warmup_steps": "two"})),
         "meta.json has unexpected content: 'warmup_steps' is not an integer"),
    ],
)
def test_bad_meta(capsys, data_run, mutate, needle) -> None:
    path = data_run("static20")
    mutate(path / "meta.json")
    assert main(["report", str(path)]) == EXIT_RUN_DIR
    assert needle in one_line(capsys)


def test_run_killed_before_its_first_step(capsys, data_run) -> None:
    path = data_run("static20")
    (path / "steps.bin").write_bytes(b"")
    (path / "events.bin").write_bytes(b"")
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "status": "running", "ended_at": None}))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "verdict: incomplete run (0 finished steps): no step finished" in out, out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["report", "RUN", "--format", "html5"], "'html5' is not one of"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["diff", "RUN"], "Missing argument 'RUN_B'"),
    ],
)
def test_bad_commands_and_choices(capsys, data_run, argv, needle) -> None:
    path = str(data_run("static20"))
    assert main([path if a == "RUN" else a for a in argv]) == EXIT_USAGE
    assert needle in one_line(capsys)


def test_a_write_error_names_the_users_path_not_lazyscopes_temporary_file() -> None:
    import errno as errno_

    from lazyscope.core.errors import OutputError

    for temp in ("runs/c35.tmp", "runs/.c35.abc123.tmp"):
        err = OSError(errno_.EISDIR, "Is a directory", temp)
        assert str(OutputError.from_os(err, "runs/c35")) == "cannot write runs/c35: Is a directory"
    other = OSError(errno_.EACCES, "Permission denied", "runs/other/file")
    assert "runs/other/file" in str(OutputError.from_os(other, "runs/c35"))
