"""The decoder's attention variants and the decoder under torch.compile, on the CPU.

Every case is a real ``lazyscope trace decoder`` in a fresh process (tiny settings: max length
32, batch 4, eval). On this machine (torch 2.9 CPU, no flash-attn, no xFormers) ``nested`` (eval)
and ``flex`` run; ``varlen``, ``xformers`` and ``nested`` training are skipped: an ``ok`` run
with zero steps whose report shows ``skipped: <reason>``. Where a dependency *is* installed
(a GPU box) the same test asks for steps instead. The compile cases share one session fixture.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import lazyscope_cmd, report_json

pytestmark = pytest.mark.slow

SMALL = ["--max-len", "32", "--batch", "4", "--device", "cpu"]


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def _trace(out: Path, *args: str) -> Path:
    proc = lazyscope_cmd("trace", "decoder", *SMALL, *args, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="session")
def variant_runs(tmp_path_factory) -> dict[str, Path]:
    """eager backend, 2 steps each: nested (eval), flex (eval), varlen, xformers, nested train."""
    base = tmp_path_factory.mktemp("variants")
    cases = {
        "nested": ["--attention", "nested", "--mode", "eval"],
        "flex": ["--attention", "flex", "--mode", "eval"],
        "varlen": ["--attention", "varlen", "--mode", "eval"],
        "xformers": ["--attention", "xformers", "--mode", "eval"],
        "nested-train": ["--attention", "nested", "--mode", "train"],
    }
    return {name: _trace(base / name, "--backend", "eager", "--steps", "2", *args)
            for name, args in cases.items()}


def _report_text(run: Path) -> str:
    proc = lazyscope_cmd("report", str(run))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", ["nested", "flex"])
def test_cpu_variants_run_their_steps(variant_runs, name) -> None:
    s = report_json(variant_runs[name])
    assert s["status"] == "ok" and s["steps"] == 2
    assert not any(n.startswith("skipped:") for n in s["notes"])
    info = json.loads((variant_runs[name] / "meta.json").read_text())["info"]
    assert info["attention"] == name and info["layout"] in ("jagged", "flex")
    steps = [json.loads(ln) for ln in (variant_runs[name] / "steps.jsonl").read_text().splitlines()]
    if name == "nested":  # padding-free: every computed token is a real one
        assert all(st["extra"]["computed_tokens"] == st["extra"]["real_tokens"] for st in steps)
    else:  # flex over the padded batch, with a note that eager flex is the unfused reference
        assert any("unfused" in n for n in s["notes"])


@pytest.mark.parametrize("name,needs,reason", [
    ("varlen", "flash_attn", "varlen: torch "),
    ("xformers", "xformers", "xformers: xformers is not installed"),
    ("nested-train", None, "rejects is_causal=True"),
])
def test_unavailable_variants_are_skipped_with_the_reason_in_the_report(
        variant_runs, name, needs, reason) -> None:
    run = variant_runs[name]
    if needs and importlib.util.find_spec(needs) is not None:
        pytest.skip(f"{needs} is installed here; the variant is not skipped on CPU for that reason")
    s = report_json(run)
    assert s["status"] == "ok" and s["steps"] == 0
    skipped = [n for n in s["notes"] if n.startswith("skipped:")]
    assert len(skipped) == 1 and reason in skipped[0], s["notes"]
    text = _report_text(run)
    assert f"note        {skipped[0]}" in text
    # the backend's own note about missing step barriers is not added to a skipped run
    assert "no step barrier" not in text


def test_xla_refuses_padding_free_variants_with_the_reason(tmp_path) -> None:
    proc = lazyscope_cmd("trace", "decoder", *SMALL, "--attention", "flex", "--steps", "1",
                         "--backend", "xla", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("lazyscope: --attention flex is not lowered by torch_xla")
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="session")
def compile_decoder_runs(tmp_path_factory) -> dict[str, Path]:
    """--backend compile, eval: longest (3 steps) and max with a planted graph break (4 steps)."""
    base = tmp_path_factory.mktemp("compile-decoder")
    return {
        "longest": _trace(base / "longest", "--backend", "compile", "--padding", "longest",
                          "--mode", "eval", "--steps", "3"),
        "max": _trace(base / "max", "--backend", "compile", "--padding", "max", "--graph-break",
                      "--mode", "eval", "--steps", "4"),
    }


def test_compile_longest_recompiles_naming_the_varying_dimension(compile_decoder_runs) -> None:
    run = compile_decoder_runs["longest"]
    steps = [json.loads(ln) for ln in (run / "steps.jsonl").read_text().splitlines()
             if json.loads(ln)["kind"] == "step"]
    recompiles = [e for e in _events(run)
                  if e["kind"] == "compile" and e["data"].get("cause_kind") == "recompile"]
    assert recompiles, "pad-to-longest must recompile under torch.compile"
    first = recompiles[0]
    varying = first["data"]["varying"]
    # the guard names the sequence dimension (index 2 of the (B, 1, L, L) mask, or index 1 of
    # the (B, L) inputs) and the two lengths are the padded lengths of the two steps
    assert varying["what"] == "size" and varying["index"] in (1, 2, 3)
    seq = [s["extra"]["seq_len"] for s in steps]
    assert varying["expected"] == seq[0] and varying["actual"] == seq[first["step"]]
    assert f"size mismatch at index {varying['index']}" in first["data"]["recompile_reason"]
    assert first["site"]["file"].endswith("decoder.py")


def test_compile_max_has_no_recompile_after_warmup_and_reports_the_graph_break(
        compile_decoder_runs) -> None:
    run = compile_decoder_runs["max"]
    s = report_json(run)
    assert s["status"] == "ok" and s["steps"] == 4
    assert s["compiles"] >= 1 and s["compiles_after_warmup"] == 0
    assert not [e for e in _events(run) if e["kind"] == "compile"
                and e["data"].get("cause_kind") == "recompile"]
    breaks = [e for e in _events(run) if e["kind"] == "graph_break"]
    assert breaks, "the planted graph_break() must be reported as a graph break"
    src = (Path(breaks[0]["site"]["file"])).read_text().splitlines()
    assert breaks[0]["site"]["file"].endswith("decoder.py")
    assert "torch._dynamo.graph_break()" in src[breaks[0]["site"]["line"] - 1]
