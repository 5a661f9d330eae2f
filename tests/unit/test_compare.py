"""Comparison rows, their rendering (real matplotlib PNG), policy parsing and the CLI's bad
input lines for compare/advise (pure or cheap: no XLA)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lazyscope.analyze.compare import Comparison, compare_rows, ratios
from lazyscope.cli import main
from lazyscope.commands.cases import parse_policies, policy_of_run, policy_slug
from lazyscope.commands.compare import write_compare_html
from lazyscope.core.errors import UsageError
from lazyscope.core.padding import Policy
from lazyscope.model import Compile, Run
from lazyscope.model.codec import decode, encode
from lazyscope.model.info import run_info
from lazyscope.render.advice import render_advice_text, render_emit
from lazyscope.render.compare import compare_page, render_compare_text
from lazyscope.render.plots import write_compare_png
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
    assert [r.compiles for r in rows] == [3, 1]
    assert rows[0].distinct_graphs == 3 and rows[1].distinct_shapes == 1
    assert rows[1].tokens_per_s == pytest.approx(300 / 4.0)
    assert rows[1].padding_efficiency == pytest.approx(300 / 600)
    assert rows[1].cumulative_wall_s == (2.0, 3.0, 4.0)
    assert rows[1].cumulative_tokens == (100, 200, 300)
    r = ratios(rows)
    assert r == {"max / longest": pytest.approx(3.0)}
    result = Comparison("decoder", 3, ["--mode", "eval"], ["longest", "max"], rows, ratios=r)
    verdict = result.verdict
    assert verdict is not None and verdict.best.policy == "max"
    assert verdict.margins == (("longest", pytest.approx(3.0)),)
    text = render_compare_text(result)
    assert "max / longest" in text
    assert "verdict: max is fastest end to end: 75 real tokens/s" in text
    assert "3.00x longest" in text
    png = write_compare_png(result, tmp_path / "compare.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # compare.json round-trips, and a file of the previous release (no verdict) still reads
    data = json.loads(json.dumps(encode(result)))
    assert data["verdict"]["best"] == "max" and data["schema_version"] == 2
    back = decode(Comparison, data)
    assert back.rows == result.rows and back.verdict.best.policy == "max"
    old = {k: v for k, v in data.items() if k not in ("verdict", "schema_version")}
    assert decode(Comparison, old).verdict.best.policy == "max"
    with pytest.raises(ValueError, match="not a lazyscope comparison"):
        decode(Comparison, {"rows": "nope"})


def test_compare_page_has_a_verdict_units_and_no_raw_arrays(tmp_path: Path) -> None:
    """The page of issue 21: a header that names the workload, the verdict, a table whose
    cells carry their units (seconds as seconds, tokens/s as a count), no per-step array."""
    runs = [("longest", _run(tmp_path, "longest", [4.0, 4.0, 4.0], [1, 1, 1], [60, 70, 80])),
            ("max", _run(tmp_path, "max", [2.0, 1.0, 1.0], [1, 0, 0], [100, 100, 100]))]
    rows = compare_rows(runs)
    result = Comparison("decoder", 3, ["--mode", "eval"], ["longest", "max"], rows,
                        ratios=ratios(rows))
    html = compare_page(result, {"pic": b"\x89PNG"}, where="runs/cmp<1>")
    assert "<h1>lazyscope compare: decoder</h1>" in html
    assert "?" not in html.split("<h1>")[1].split("</div>")[0]  # no "backend ? on ?"
    assert 'class="verdict ok"' in html and "max is fastest end to end" in html
    assert "3.00x longest" in html
    assert "<th>real tokens/s</th>" in html and "<td class=\"n\">75</td>" in html
    assert "4.00 s" in html  # wall seconds with their unit
    assert "75 s" not in html and "cumulative" not in html.split("<h2>Ratios")[0]
    assert "runs/cmp&lt;1&gt;" in html and "data:image/png;base64," in html
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "compare.json").write_text(json.dumps(encode(result)))
    path = write_compare_html(tmp_path / "c", result)
    assert path.read_text().startswith("<!DOCTYPE html>") and "max is fastest" in path.read_text()


def test_parse_policies() -> None:
    assert parse_policies("max,bucket:64,128,packed,auto") == ["max", "bucket:64,128",
                                                                "packed", "auto"]
    assert parse_policies("bucket:auto,longest") == ["bucket:auto", "longest"]
    with pytest.raises(UsageError, match="repeated"):
        parse_policies("max,max")
    with pytest.raises(UsageError, match="empty"):
        parse_policies("max,,packed")
    assert policy_slug("bucket:64,128") == "bucket-64-128"


def test_advice_text_ranks_and_emits_code() -> None:
    from lazyscope.analyze.buckets import advise

    rng = __import__("random").Random(0)
    advice = advise([rng.randint(1, 255) for _ in range(400)], batch=4, top=256,
                    max_buckets=3, horizon=10000)
    text = render_advice_text(advice)
    assert "horizon: 10,000 steps of 4 sequences" in text
    assert "recommended: packed 4x256" in text and "needs a model change" in text
    assert "without changing the model:" in text and "pad to max" in text
    assert "uncalibrated" in text and "x max" in text
    code = render_emit(advice)
    assert "row_len = max(256, max(lengths))" in code
    assert "PackedBatchSampler(lengths, rows=4, row_len=row_len" in code
    assert "collate_fn=PackRows(4, row_len, return_document_ids=True)" in code
    # it runs as pasted, on data with a document longer than any the run showed
    torch = pytest.importorskip("torch")
    dataset = [{"input_ids": torch.randint(1, 9, (n,))} for n in (300, 20, 200, 7, 256, 90)]
    scope: dict = {"dataset": dataset}
    exec(compile(code, "emit", "exec"), scope)
    batches = list(scope["loader"])
    assert {tuple(b["input_ids"].shape) for b in batches} == {(4, 300)}
    assert sum(int((b["document_ids"] >= 0).sum()) for b in batches) == 300 + 20 + 200 + 7 + 256 + 90
    plain = render_emit(advice, advice.best_without_model_change)
    assert "PadToBuckets([" in plain and "rows=4" in plain
    compile(plain, "emit", "exec")


def test_policy_of_a_scenario_run() -> None:
    assert policy_of_run(run_info({"packed_rows": [8, 256]}).workload) == Policy("packed", (256,), rows=8,
                                                              row_len=256)
    assert policy_of_run(run_info({"policy": "packed", "max_len": 32, "batch": 4}).workload).rows == 4
    assert policy_of_run(run_info({"policy": "longest", "buckets": []}).workload) == Policy("longest")
    assert policy_of_run(run_info({"buckets": [256], "max_len": 256}).workload).kind == "max"
    assert policy_of_run(run_info({"buckets": [64, 256], "max_len": 256, "batching": "grouped"}).workload) == \
        Policy("buckets", (64, 256), grouped=True)
    assert policy_of_run(run_info({}).workload) is None


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "--policies", "max,bogus", "--steps", "2", "decoder"],
         "unknown padding policy 'bogus'"),
        (["compare", "--policies", "bucket:a,12", "--steps", "2", "decoder"],
         "malformed bucket list"),
        (["compare", "--policies", "max", "nope"], "unknown scenario 'nope'"),
        (["advise", "--lengths", "/no/such/file"], "cannot read lengths file"),
        (["advise", "--lengths", "LENGTHS", "--max-buckets", "0"], "'0' is out of range: at least 1"),
        (["advise"], "either RUN_DIR or --lengths"),
        (["advise", "GARBAGE"], "line 2: 'hello' is not a whole number"),
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


def test_advise_on_a_run_with_nothing_varying_is_a_usage_error(data_run, capsys) -> None:
    """A run whose graphs never change shape, and one whose only varying input grows every
    step (torch.cat accumulation): one line each, exit 2, saying why."""
    assert main(["advise", str(data_run("static20"))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "nothing to advise on: no dimension of the run's graph inputs varies" in err
    assert main(["advise", str(data_run("dynamic20"))]) == 2
    err = capsys.readouterr().err.strip()
    assert "grows at every step" in err and "padding does not fix" in err


def test_advise_lengths_file_json(tmp_path: Path, capsys) -> None:
    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(v) for v in [10, 250, 30, 200, 60, 255, 5, 100] * 10))
    assert main(["advise", "--lengths", str(f), "--batch", "4", "--max-len", "256",
                 "--max-buckets", "3", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["per_k"]) == 3 and data["lengths"]["top"] == 256
    assert data["per_k"][0]["boundaries"] == [256]
    assert data["horizon"] == 100_000 and data["recommended"]["kind"] == "packed"
    assert main(["advise", "--lengths", str(f), "--batch", "4", "--max-len", "256",
                 "--no-model-changes", "--emit"]) == 0
    code = capsys.readouterr().out
    assert code.startswith("# lazyscope advise: ") and "PadToBuckets(" in code


def test_rows_that_ran_the_same_policy_measure_the_noise(tmp_path: Path) -> None:
    a = compare_rows([("packed", _run(tmp_path, "a", [2.0, 1.0], [1, 0], [64, 64]))])[0]
    b = compare_rows([("auto", _run(tmp_path, "b", [2.5, 1.0], [1, 0], [64, 64]))])[0]
    c = compare_rows([("max", _run(tmp_path, "c", [2.0, 1.0], [1, 0], [80, 80]))])[0]
    from dataclasses import replace

    a, b = replace(a, ran="packed:8x64"), replace(b, ran="packed:8x64", resolved="packed:8x64")
    c = replace(c, ran="max")
    result = Comparison("decoder", 2, [], ["packed", "auto", "max"], [a, b, c])
    assert [[r.policy for r in g] for g in result.same_runs()] == [["packed", "auto"]]
    text = render_compare_text(result)
    assert "note: packed and auto ran the same padded shapes (64): 67 vs 57 real tokens/s " \
           "is measurement noise (17%)" in text
    assert "ran the same padded shapes" in compare_page(result)


def test_rows_that_padded_to_the_same_shapes_are_noise_whatever_their_names(tmp_path) -> None:
    """pow2 and max both padded every batch to 256: the same work; the verdict never ranks
    one above the other, and says the run-to-run spread is not measured (one run a policy)."""
    pow2 = compare_rows([("pow2", _run(tmp_path, "p", [2.0, 1.0], [1, 0], [256, 256]))])[0]
    mx = compare_rows([("max", _run(tmp_path, "m", [2.6, 1.0], [1, 0], [256, 256]))])[0]
    longest = compare_rows([("longest", _run(tmp_path, "l", [9.0, 8.0], [1, 1], [70, 90]))])[0]
    result = Comparison("decoder", 2, [], ["pow2", "max", "longest"], [pow2, mx, longest])
    assert [[r.policy for r in g] for g in result.same_runs()] == [["pow2", "max"]]
    v = result.verdict
    assert v.best.policy == "pow2" and [n for n, _ in v.noise] == ["max"]
    assert [n for n, _ in v.margins] == ["longest"] and v.spread is None
    text = render_compare_text(result)
    assert "max: the same as it within noise" in text and "not measured" in text
    assert "x max" not in text.split("verdict:")[1]
    # two policies, same shapes: no policy wins
    only = Comparison("decoder", 2, [], ["pow2", "max"], [pow2, mx])
    assert render_compare_text(only).split("verdict: ")[1].startswith("no policy wins")


def test_a_difference_within_the_repeats_spread_is_noise(tmp_path) -> None:
    from dataclasses import replace

    a = compare_rows([("bucket:auto", _run(tmp_path, "a", [2.0, 1.0], [1, 0], [64, 96]))])[0]
    b = compare_rows([("max", _run(tmp_path, "b", [2.2, 1.0], [1, 0], [128, 128]))])[0]
    a, b = replace(a, repeats=(60.0, 70.0, 66.0)), replace(b, repeats=(58.0, 62.0, 61.0))
    v = Comparison("decoder", 2, [], ["bucket:auto", "max"], [a, b], repeat=3).verdict
    assert v.spread is not None and abs(v.spread - 70 / 60 + 1) < 1e-9
    assert [n for n, _ in v.noise] == ["max"] and not v.margins


def test_repeats_keep_the_median_run(tmp_path: Path) -> None:
    from lazyscope.commands.cases import _median_row

    rows = [compare_rows([("max", _run(tmp_path, f"m{i}", [w, 1.0], [1, 0], [64, 64]))])[0]
            for i, w in enumerate((2.0, 6.0, 3.0))]
    median = _median_row([(r.path, r) for r in rows] + [("lost", None)])
    assert median.path == rows[2].path  # 200/4 = 50 tokens/s: the middle of 66.7, 28.6, 50
    assert median.repeats == tuple(round(r.tokens_per_s, 1) for r in rows)
    assert _median_row([("lost", None)]) is None
    result = Comparison("decoder", 2, [], ["max"], [median], repeat=3)
    back = decode(Comparison, json.loads(json.dumps(encode(result))))
    assert back.repeat == 3 and back.rows[0].repeats == median.repeats
    text = render_compare_text(result)
    assert "x 3 rounds" in text and "67, 29, 50" in text
    assert "real tokens/s of each round" in compare_page(result)


@pytest.mark.parametrize("version,spelling,not_spelled", [
    ("4.57.1", "TrainingArguments(group_by_length=True)", "train_sampling_strategy"),
    ("5.0.0", 'TrainingArguments(train_sampling_strategy="group_by_length")', "group_by_length="),
])
def test_the_length_grouping_is_spelled_as_the_runs_transformers_spells_it(
        version: str, spelling: str, not_spelled: str) -> None:
    from dataclasses import replace

    from lazyscope.analyze.buckets import advise

    rng = __import__("random").Random(1)
    advice = advise([rng.randint(1, 255) for _ in range(2000)], batch=8, top=256,
                    horizon=100_000, packing=False)
    collator = {"name": "DataCollatorWithPadding", "package": "transformers", "object": True,
                "version": version, "trainer": True, "variable": "data_collator",
                "built_at": ["/w/train.py", 40],
                "accepts": ["max_length", "pad_to_multiple_of", "padding", "tokenizer"]}
    advice = replace(advice, collator=collator)
    grouped = next(p for p in advice.plans if p.policy.grouped)
    code = render_emit(advice, grouped)
    assert spelling in code and not_spelled not in code, code
    # the plan ranked first leads, the Trainer's collator wrapped (never replaced); the
    # collator's smallest change follows with its own prediction beside the plan's
    assert code.splitlines()[0].startswith(f"# lazyscope advise: {grouped.name} -- predicted ")
    assert "PadToBuckets" not in code
    assert code.index("data_collator = Bucketed(data_collator, [") < \
        code.index("add pad_to_multiple_of=")
    assert "DataCollatorWithPadding(...) at /w/train.py:40" in code
    option = next(ln for ln in code.splitlines() if "the smallest change to the " in ln)
    assert re.search(r"predicted \d+\.\d\dx the real tokens/s of .*, against the plan's "
                     r"\d+\.\d\dx above", option), option
    compile(code, "emit", "exec")
    # a class whose installed signature has no pad_to_multiple_of is never told to take it
    no_multiple = replace(advice, collator={**collator, "name": "DataCollatorWithFlattening",
                                            "accepts": ["return_position_ids", "separator_id"]})
    assert "pad_to_multiple_of" not in render_emit(no_multiple, grouped)


def test_the_installed_transformers_takes_the_spelling_emitted_for_it(tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    from lazyscope.analyze.makers import group_by_length

    spelled = group_by_length(transformers.__version__)
    args = eval(spelled.replace("TrainingArguments(", "dict("))  # noqa: S307 - our own text
    made = transformers.TrainingArguments(output_dir=str(tmp_path), **args)
    assert "group_by_length" in str(getattr(made, "train_sampling_strategy", "")) or \
        getattr(made, "group_by_length", False)


def test_when_the_runs_own_policy_wins_the_emitted_code_says_so_and_never_pads_to_longest() -> None:
    from dataclasses import replace

    from lazyscope.analyze.buckets import advise

    rng = __import__("random").Random(3)
    advice = advise([rng.randint(1, 255) for _ in range(400)], batch=8, top=256, horizon=10,
                    packing=False)
    # a run whose own policy (pad to longest) came first, as a short horizon can rank it
    advice = replace(advice, plans=tuple(sorted(advice.plans,
                                                key=lambda p: p.policy.kind != "longest")))
    assert advice.recommended.policy.kind == "longest"
    code = render_emit(advice)
    assert "what this run does, is predicted fastest over 10 steps: nothing to change" in code
    assert "PadToBuckets(None" not in code and "PadToBuckets([" in code
    compile(code, "emit", "exec")


def test_packing_into_the_same_shapes_is_more_work_not_noise(tmp_path) -> None:
    """max and packed both ran batches of 256, but packed put ~2x the real tokens in them
    (the bench's decoder: 16,395 vs 9,011 real tokens/s): not the same run, so packed wins
    by its margin, where the verdict used to call the 1.8x measurement noise."""
    from dataclasses import replace

    mx = compare_rows([("max", _run(tmp_path, "m", [2.0, 1.0], [1, 0], [256, 256]))])[0]
    packed = compare_rows([("packed", _run(tmp_path, "p", [2.0, 1.0], [1, 0], [256, 256]))])[0]
    packed = replace(packed, real_tokens=2 * mx.real_tokens,
                     tokens_per_s=2 * mx.tokens_per_s)
    result = Comparison("decoder", 2, [], ["max", "packed"], [mx, packed])
    assert result.same_runs() == []
    v = result.verdict
    assert v.best.policy == "packed" and [n for n, _ in v.margins] == ["max"] and not v.noise
    assert "no policy wins" not in render_compare_text(result)


def test_a_failed_policy_is_the_exit_status_s_own_line(tmp_path: Path, monkeypatch,
                                                        capsys) -> None:
    """compare exits 5 when a policy failed: the table says so, and stderr has one line
    naming the policy and its error (was: exit 5 and nothing on stderr)."""
    from lazyscope.analyze.compare import failed_row
    from lazyscope.commands import compare as compare_cmd

    def fake_compare(scenario: str, policies: list[str], **kwargs: object) -> Comparison:
        (tmp_path / "c").mkdir()
        rows = [failed_row("max", str(tmp_path / "max"), "lazyscope: max.py failed: boom")]
        return Comparison(scenario=scenario, steps=2, args=[], policies=policies, rows=rows,
                          ratios={}, failed=["max"])

    monkeypatch.setattr(compare_cmd, "run_compare", fake_compare)
    assert main(["compare", "-q", "--policies", "max", "--out", str(tmp_path / "c"),
                 "decoder"]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lazyscope: 1 policy of 1 failed: max: max.py failed: boom"], err


def test_the_time_left_is_priced_per_policy_and_rescaled_by_the_runs_done() -> None:
    """Pad to max compiles once, pad to longest at most steps: the estimate prices each policy
    (here as a calibration would), not the mean of the runs done, and says how to shorten it."""
    from lazyscope.commands.cases import TimeLeft

    clock = TimeLeft([(None, "max"), (None, "longest"), (None, "pow2")], 40)
    assert clock.left(0) is None and clock.first_line(3) == ""  # nothing measured yet
    clock.predicted = {(None, "max"): 20.0, (None, "longest"): 240.0, (None, "pow2"): 20.0}
    clock.halved = {(None, "max"): 15.0, (None, "longest"): 150.0, (None, "pow2"): 15.0}
    clock.startup, clock.calibrated_on = 10.0, "max's first 10 steps"
    line = clock.first_line(3)
    assert line.startswith("lazyscope compare: about 5.2 min for the 3 runs (max ~30 s, "
                           "longest ~4.2 min, pow2 ~30 s), calibrated on max's first 10 "
                           "steps; shorter: --steps 20 (about 3.5 min) or --policies without "
                           "longest (about 60 s)"), line
    # the first run took 36 s, 18 s of it its steps: its start-up and ending are measured
    clock.finished((None, "max"), 36.0, 18.0)
    total, per = clock.left(1) or (0.0, {})
    assert per == {"longest": pytest.approx(18 + 240), "pow2": pytest.approx(18 + 20)}
    assert clock.after(1).startswith("  (about 4.9 min left for 2 runs, longest ~4.3 min of "
                                     "it; shorter: --steps 20")
    # from two runs on, their steps against their predictions (0.9x, 0.5x: the median, the
    # larger of two) rescale the rest
    clock.finished((None, "pow2"), 28.0, 10.0)
    assert clock.left(1) is not None and clock.estimate((None, "longest")) == \
        pytest.approx(18 + 0.9 * 240)
    # the running policy's own pace: 30 steps left at 2 s each, then what follows it
    assert clock.running(1, 20.0, 10, 2.0) == pytest.approx(60 + 28.0)
    assert clock.after(3) == ""


def test_without_a_prediction_the_runs_done_say_it() -> None:
    from lazyscope.commands.cases import TimeLeft

    clock = TimeLeft([(None, "a"), (None, "b"), (None, "a")], 10)
    clock.finished((None, "a"), 30.0, 25.0)
    # b: the mean of the runs done; a again (--repeat): its own measured time
    assert clock.left(1) == (60.0, {"b": 30.0, "a": 30.0})
    assert "left for 2 runs" in clock.after(1)
