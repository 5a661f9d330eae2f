"""The CLI in-process: listing, reports, and one clear line for bad input."""

from __future__ import annotations

import json

import pytest

from lazyscope.cli import main


def test_scenarios_lists_names(capsys) -> None:
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert "lazytensor-dynamic" in out


def test_report_text_and_json(capsys, data_run) -> None:
    path = data_run("dynamic20")
    assert main(["report", str(path)]) == 0
    assert "verdict: recompiles in steady state" in capsys.readouterr().out
    assert not (path / "timeline.png").exists()  # text and json only render
    assert main(["report", str(path), "--format", "html"]) == 0
    assert capsys.readouterr().out.strip() == str(path / "report.html")
    assert (path / "timeline.png").exists() and (path / "report.html").exists()
    assert main(["report", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compiles"] == 20 and out["findings"][0]["count"] == 19


def test_report_on_cut_steps_file(capsys, data_run) -> None:
    path = data_run("dynamic20")
    steps = path / "steps.bin"
    data = steps.read_bytes()
    steps.write_bytes(data[: len(data) - 100])
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cut off mid-write" in out and "verdict:" in out


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["trace", "no-such-scenario"], 2, "unknown scenario 'no-such-scenario'; scenarios: "),
        (["trace", "missing_script.py"], 2, "does not exist"),
        (["trace", "lazytensor-dynamic", "--steps", "-3"], 2, "-3"),
        (["trace", "lazytensor-dynamic", "--mode", "sideways"], 2, "bad arguments for scenario"),
        (["report", "/nonexistent/run"], 3, "not a directory"),
        (["trace", "lazytensor-dynamic", "--backend", "tpu9"], 2, "tpu9"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, code, needle) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert needle in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_unparsable_script(capsys, tmp_path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("def f(:\n")
    assert main(["trace", str(script)]) == 2
    assert "does not parse: line 1" in capsys.readouterr().err


def test_existing_out_is_refused(capsys, data_run) -> None:
    path = data_run("static20")
    before = (path / "steps.bin").read_bytes()
    assert main(["trace", "lazytensor-dynamic", "--out", str(path)]) == 3
    assert "--force" in capsys.readouterr().err
    assert (path / "steps.bin").read_bytes() == before
