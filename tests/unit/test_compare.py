"""Comparison rows, their rendering (real matplotlib PNG), policy parsing and the CLI's bad
input lines for compare/advise (pure or cheap: no XLA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyscope.analyze.compare import compare_rows, ratios
from lazyscope.cli import main
from lazyscope.compare import parse_policies, policy_slug
from lazyscope.errors import UsageError
from lazyscope.model import Compile, Run
from lazyscope.render.compare import render_advice_text, render_compare_text, write_compare_png
from tests.builders import build_run, frame


def _run(tmp: Path, policy: str, walls: list[float], compiles: list[int],
         seq: list[int]) -> Run:
    user = frame("/work/train.py", 30, "main")
    events = [{"kind": "compile", "step": i, "seconds": 0.5 * w, "stack": (user,), "key": f"g{s}",
               "payload": Compile(cause="step barrier", cause_kind="barrier")}
              for i, (w, c, s) in enumerate(zip(walls, compiles, seq, strict=True)) if c]
    steps = [{"wall_s": w, "compile_count": c, "compile_s": 0.5 * w if c else 0.0}
             for w, c in zip(walls, compiles, strict=True)]
    notes = {i: {"real_tokens": 100, "computed_tokens": 2 * s, "seq_len": s}
             for i, s in enumerate(seq)}
    return build_run(tmp / policy, steps=steps, events=events, annotations=notes,
                     info={"buckets": sorted(set(seq))})


def test_rows_ratios_and_rendering(tmp_path: Path) -> None:
    runs = [("longest", _run(tmp_path, "longest", [4.0, 4.0, 4.0], [1, 1, 1], [60, 70, 80])),
            ("max", _run(tmp_path, "max", [2.0, 1.0, 1.0], [1, 0, 0], [100, 100, 100]))]
    rows = compare_rows(runs)
    assert [r["compiles"] for r in rows] == [3, 1]
    assert rows[0]["distinct_graphs"] == 3 and rows[1]["distinct_shapes"] == 1
    assert rows[1]["tokens_per_s"] == pytest.approx(300 / 4.0)
    assert rows[1]["padding_efficiency"] == pytest.approx(300 / 600)
    assert rows[1]["cumulative_wall_s"] == [2.0, 3.0, 4.0]
    r = ratios(rows)
    assert r == {"max / longest": pytest.approx(3.0)}
    result = {"scenario": "decoder", "steps": 3, "args": ["--mode", "eval"], "rows": rows,
              "ratios": r, "failed": []}
    text = render_compare_text(result)
    assert "max / longest" in text and "verdict: max is fastest" in text
    png = write_compare_png(result, tmp_path / "compare.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_parse_policies() -> None:
    assert parse_policies("max,bucket:64,128,packed") == ["max", "bucket:64,128", "packed"]
    assert parse_policies("bucket:auto,longest") == ["bucket:auto", "longest"]
    with pytest.raises(UsageError, match="repeated"):
        parse_policies("max,max")
    with pytest.raises(UsageError, match="empty"):
        parse_policies("max,,packed")
    assert policy_slug("bucket:64,128") == "bucket-64-128"


def test_advice_text_marks_best_and_alternatives() -> None:
    from lazyscope.analyze.buckets import advise

    advice = advise([200, 10, 255, 30] * 20, batch=4, top=256, max_buckets=3, grouped=True,
                    horizon=10000)
    text = render_advice_text(advice)
    assert "<- best" in text and "pad to max" in text and "pow2" in text
    assert text.strip().splitlines()[-1].startswith("advice: ")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "decoder", "--policies", "max,bogus", "--steps", "2"],
         "unknown padding policy 'bogus'"),
        (["compare", "decoder", "--policies", "bucket:a,12", "--steps", "2"],
         "malformed bucket list"),
        (["compare", "nope", "--policies", "max"], "unknown scenario 'nope'"),
        (["advise", "--lengths", "/no/such/file"], "cannot read lengths file"),
        (["advise", "--lengths", "LENGTHS", "--max-buckets", "0"], "at least 1"),
        (["advise"], "either RUN_DIR or --lengths"),
        (["advise", "GARBAGE"], "not an integer"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, tmp_path: Path, capsys) -> None:
    good = tmp_path / "lengths.txt"
    good.write_text("3\n5\n200\n")
    bad = tmp_path / "garbage.txt"
    bad.write_text("12\nhello\n")
    argv = [str(good) if a == "LENGTHS" else a for a in argv]
    if argv == ["advise", "GARBAGE"]:
        argv = ["advise", "--lengths", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lazyscope: ") and needle in err
    assert not (Path("runs").exists() and any(p.name.startswith("compare-nope")
                                              for p in Path("runs").iterdir()))


def test_advise_on_a_run_without_annotations_is_a_usage_error(data_run, capsys) -> None:
    assert main(["advise", str(data_run("static20"))]) == 2
    assert "no per-step seq_len" in capsys.readouterr().err


def test_advise_lengths_file_json(tmp_path: Path, capsys) -> None:
    import json

    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(v) for v in [10, 250, 30, 200, 60, 255, 5, 100] * 10))
    assert main(["advise", "--lengths", str(f), "--batch", "4", "--max-len", "256",
                 "--max-buckets", "3", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["per_k"]) == 3 and data["top"] == 256
    assert data["per_k"][0]["boundaries"] == [256]
