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
        (["trace", "--steps", "-3", "lazytensor-dynamic"], 2, "-3"),
        (["trace", "lazytensor-dynamic", "--mode", "sideways"], 2, "bad arguments for scenario"),
        (["report", "/nonexistent/run"], 3, "not a directory"),
        (["trace", "--backend", "tpu9", "lazytensor-dynamic"], 2, "tpu9"),
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
    assert main(["trace", "--out", str(path), "lazytensor-dynamic"]) == 3
    assert "--force" in capsys.readouterr().err
    assert (path / "steps.bin").read_bytes() == before


# -- the command line users know: lazyscope's options, the target, then the program's -----------

ARGV_SCRIPT = """\
import argparse, json, os, sys
open(os.environ["ARGV_OUT"], "w").write(json.dumps(sys.argv[1:]))
if os.environ.get("STRICT"):
    argparse.ArgumentParser().parse_args()   # knows no option at all: exits 2 on any
"""


@pytest.fixture
def argv_script(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(ARGV_SCRIPT)
    seen = tmp_path / "argv.json"
    monkeypatch.setenv("ARGV_OUT", str(seen))
    return script, lambda: json.loads(seen.read_text())


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        # everything after the script is the script's, lazyscope's own option names included
        (["--steps", "3", "--out", "x", "--lr=0.1"], ["--steps", "3", "--out", "x", "--lr=0.1"]),
        # a `--` right after the script is dropped (the old separator), a later one is kept
        (["--", "--steps", "1", "--", "y"], ["--steps", "1", "--", "y"]),
        ([], []),
    ],
)
def test_arguments_after_the_script_are_the_scripts(capsys, tmp_path, argv_script, after,
                                                     expected) -> None:
    script, seen = argv_script
    out = tmp_path / "run"
    assert main(["trace", "--backend", "eager", "--no-views", "--quiet", "--out", str(out),
                 str(script), *after]) == 0
    assert seen() == expected
    assert json.loads((out / "meta.json").read_text())["args"] == expected
    assert f"run saved in {out}" in capsys.readouterr().out


def test_a_lazyscope_option_after_a_scenario_says_where_it_belongs(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    assert main(["trace", "lazytensor-dynamic", "--out", str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("lazyscope: bad arguments for scenario lazytensor-dynamic: "
                           "unrecognized arguments: --out ")
    assert ("--out after lazytensor-dynamic went to lazytensor-dynamic, not to lazyscope: "
            "lazyscope's options go before the target (lazyscope trace --out ... "
            "lazytensor-dynamic ...)") in line
    assert len(line.splitlines()) == 1 and not out.exists()


def test_a_script_that_refuses_a_lazyscope_option_gets_the_hint(capsys, tmp_path, argv_script,
                                                                 monkeypatch) -> None:
    script, seen = argv_script
    monkeypatch.setenv("STRICT", "1")
    out = tmp_path / "run"
    assert main(["trace", "--backend", "eager", "--no-views", "--quiet", "--out", str(out),
                 str(script), "--steps", "3"]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert seen() == ["--steps", "3"]
    assert err[:2] == ["usage: train.py [-h]", "train.py: error: unrecognized arguments: --steps 3"]
    assert err[2].startswith("lazyscope: ") and "the program exited with status 2" in err[2]
    assert err[3] == (f"lazyscope: warning: --steps after {script} went to {script}, not to "
                       f"lazyscope: lazyscope's options go before the target (lazyscope trace "
                       f"--steps ... {script} ...)")


def test_help_says_where_options_go(capsys) -> None:
    for command in ("trace", "compare"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert f"Usage: lazyscope {command} [OPTIONS]" in text
        assert "lazyscope's options go before" in text
        assert "untouched" in text


def test_an_unknown_option_before_the_target_is_lazyscopes_error(capsys) -> None:
    assert main(["trace", "--lr", "0.1", "train.py"]) == 2
    assert capsys.readouterr().err.strip() == (
        "lazyscope: no such option --lr: lazyscope's options go before TARGET, the program's "
        "own after it (lazyscope trace [OPTIONS] TARGET --lr ...)")
    assert main(["compare", "--step", "3", "decoder"]) == 2
    assert capsys.readouterr().err.strip() == (
        "lazyscope: no such option --step (did you mean --steps?): lazyscope's options go "
        "before SCENARIO, the program's own after it (lazyscope compare [OPTIONS] SCENARIO "
        "--step ...)")


def test_bare_lazyscope_prints_its_usage_page_line_by_line(capsys) -> None:
    """No command: the usage page as click lays it out (never folded into one error line),
    on stderr, exit 2."""
    assert main([]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0] == "Usage: lazyscope [OPTIONS] COMMAND [ARGS]..."
    assert len(lines) > 15 and "\\n" not in captured.err and not captured.out
    assert any(line.strip().startswith("trace ") for line in lines)
    assert not any(line.startswith("lazyscope: Usage") for line in lines)


def test_a_script_that_took_its_arguments_and_failed_later_gets_no_order_hint(
        capsys, tmp_path) -> None:
    """--steps is the script's own option too: it parsed it, then failed for another reason;
    no word that the option was meant for lazyscope."""
    script = tmp_path / "train.py"
    script.write_text("import argparse\np = argparse.ArgumentParser()\n"
                      "p.add_argument('--steps', type=int)\np.parse_args()\n"
                      "raise KeyError('label_ids')\n")
    assert main(["trace", "--backend", "eager", "--no-views", "--quiet", "--out",
                 str(tmp_path / "run"), str(script), "--steps", "3"]) == 5
    err = capsys.readouterr().err
    assert "KeyError" in err and "lazyscope's options go before" not in err


def test_the_command_of_a_process_freezes_its_imports(data_run) -> None:
    """The console script and ``python -m lazyscope`` run ``entry``: main() with the imported
    modules frozen out of the cyclic GC's reach (tests call main(), which freezes nothing)."""
    import subprocess
    import sys

    import tomllib

    from tests.conftest import REPO

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["lazyscope"] == "lazyscope.cli:entry"
    assert "entry()" in (REPO / "lazyscope" / "__main__.py").read_text()
    path = data_run("dynamic20")
    code = ("import gc, sys\nfrom lazyscope.cli import entry\n"
            f"sys.argv = ['lazyscope', 'report', {str(path)!r}, '--format', 'json']\n"
            "code = entry()\nprint(code, gc.get_freeze_count() > 1000, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.stderr.strip().splitlines()[-1] == "0 True", proc.stderr
    assert json.loads(proc.stdout)["compiles"] == 20
