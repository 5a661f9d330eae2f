"""The decoder's attention variants and the decoder under torch.compile, on the CPU.

Each case runs the scenario itself, ``decoder.main([...])`` in process (or the standalone script
in a fresh process), with ``--backend eager|compile --device cpu`` and tiny settings (preset
tiny, max length 32, batch 2, 2 steps); what it tells lazyscope (``lazyscope.set_info``,
``lazyscope.note``, ``lazyscope.annotate_step``) is recorded by replacing those three functions,
so no trace and no CLI is involved. On this machine (torch 2.9 CPU, no flash-attn, no xFormers)
``sdpa``, ``sdpa-causal``, ``math`` and ``flex`` run; ``nested`` (torch's only jagged SDPA kernel
off CUDA rejects ``is_causal=True``), ``varlen`` and ``xformers`` are skipped: zero steps, the
reason in ``info["skipped"]`` and one ``skipped: <reason>`` note. On ``--backend xla`` the
padding-free variants are refused with a one-line UsageError. The compile cases check dynamo's
own view: pad-to-longest recompiles on the sequence dimension, pad-to-max does not, and
``--graph-break`` plants a graph break.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from typing import Any, NamedTuple

import pytest

pytest.importorskip("torch")

import lazyscope  # noqa: E402
from lazyscope.core.errors import UsageError  # noqa: E402
from lazyscope_scenarios import decoder as D  # noqa: E402
from tests.conftest import REPO  # noqa: E402

SMALL = ["--preset", "tiny", "--max-len", "32", "--batch", "2", "--steps", "2",
         "--backend", "eager", "--device", "cpu"]
RUNNABLE_ON_CPU = ["flex", "math", "sdpa", "sdpa-causal"]


class Ran(NamedTuple):
    rc: int
    info: dict[str, Any]
    notes: list[str]
    steps: list[dict[str, Any]]
    stdout: str

    @property
    def loss(self) -> float:
        return float(re.search(r"loss (\S+)$", self.stdout.strip()).group(1))


def _run(monkeypatch, capsys, *args: str) -> Ran:
    """decoder.main(SMALL + args), recording what it hands to lazyscope."""
    info: dict[str, Any] = {}
    notes: list[str] = []
    steps: list[dict[str, Any]] = []
    with monkeypatch.context() as m:
        m.setattr(lazyscope, "set_info", lambda **values: info.update(values))
        m.setattr(lazyscope, "note", notes.append)
        m.setattr(lazyscope, "annotate_step", lambda **values: steps.append(values))
        rc = D.main([*SMALL, *args])
    return Ran(rc, info, notes, steps, capsys.readouterr().out)


@pytest.mark.parametrize("padding", ["packed", "max"])
@pytest.mark.parametrize("name", RUNNABLE_ON_CPU)
def test_cpu_variants_run_their_steps(monkeypatch, capsys, name, padding) -> None:
    ran = _run(monkeypatch, capsys, "--attention", name, "--padding", padding, "--mode", "eval")
    assert ran.rc == 0 and "2 steps" in ran.stdout
    assert not any(n.startswith("skipped:") for n in ran.notes) and "skipped" not in ran.info
    assert ran.info["attention"] == name and ran.info["causal"] is True
    assert ran.info["layout"] == ("flex" if name == "flex" else "padded")
    assert ran.info["params"] > 0
    assert len(ran.steps) == 2
    for st in ran.steps:  # padded layouts compute every row in full
        assert st["computed_tokens"] == st["rows"] * st["seq_len"] == 2 * 32
        assert st["real_tokens"] == sum(st["lengths"]) <= st["computed_tokens"]
    # flex outside torch.compile is PyTorch's unfused reference: the run says so
    assert any("unfused" in n for n in ran.notes) == (name == "flex")


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_variants_compute_the_same_causal_decoder_in_train_and_eval(monkeypatch, capsys,
                                                                     mode) -> None:
    """Same seed, same weights, same batches: every runnable variant ends at the same loss
    (eval: the loss of step 2; train: after two optimizer steps)."""
    losses = {name: _run(monkeypatch, capsys, "--attention", name, "--padding", "packed",
                         "--mode", mode).loss
              for name in RUNNABLE_ON_CPU}
    assert len(set(losses.values())) == 1, losses


def test_device_defaults_to_auto_without_a_trace(monkeypatch, capsys) -> None:
    args = [a for a in SMALL if a not in ("--device", "cpu")]
    assert D.parse_args(args).device is None
    info: dict[str, Any] = {}
    monkeypatch.setattr(lazyscope, "set_info", lambda **values: info.update(values))
    assert D.main([*args, "--mode", "eval", "--padding", "pow2"]) == 0
    assert info["buckets"] == [16, 32]  # pow2 from 16, capped at the max length


@pytest.mark.parametrize("name,mode,why", [
    ("nested", "eval", "rejects is_causal=True"),
    ("nested", "train", "rejects is_causal=True"),
    ("varlen", "eval", "varlen: "),
    ("xformers", "eval", "xformers: "),
])
def test_unavailable_variants_are_skipped_with_the_reason(monkeypatch, capsys, name, mode,
                                                          why) -> None:
    ran = _run(monkeypatch, capsys, "--attention", name, "--mode", mode)
    assert ran.rc == 0 and ran.steps == []
    reason = ran.info["skipped"]
    assert why in reason and reason.startswith(f"{name}: ") and "\n" not in reason
    assert ran.notes == [f"skipped: {reason}"]
    assert ran.info["attention"] == name
    assert f"attention={name}: skipped: {reason}" in ran.stdout


@pytest.mark.parametrize("name", ["nested", "varlen", "flex", "xformers"])
def test_xla_refuses_padding_free_variants_with_one_line(name) -> None:
    with pytest.raises(UsageError) as err:
        D.main([*SMALL, "--attention", name, "--backend", "xla"])
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"--attention {name} is not lowered by torch_xla; on --backend xla "
                           "use sdpa, sdpa-causal or math")


def test_other_refusals() -> None:
    with pytest.raises(UsageError, match="leave it auto on --backend xla"):
        D.main([*SMALL, "--backend", "xla", "--sdpa-backend", "flash"])
    with pytest.raises(UsageError, match="--autocast is for the eager/compile backends"):
        D.main([*SMALL, "--backend", "xla", "--autocast", "bf16"])
    with pytest.raises(UsageError, match="applies to sdpa, sdpa-causal or nested, not to flex"):
        D.main([*SMALL, "--attention", "flex", "--sdpa-backend", "math"])


def _standalone(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args, *SMALL], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_script_runs_standalone() -> None:
    proc = _standalone("-m", "lazyscope_scenarios.decoder", "--attention", "sdpa-causal",
                       "--padding", "longest", "--mode", "eval")
    assert proc.returncode == 0, proc.stderr
    assert "attention=sdpa-causal: 2 steps" in proc.stdout
    proc = _standalone("-m", "lazyscope_scenarios.decoder", "--attention", "varlen")
    assert proc.returncode == 0, proc.stderr
    assert "attention=varlen: skipped: varlen: " in proc.stdout


# ------------------------------------------------------------------ torch.compile (dynamo)


def _appender(into: list[dict[str, Any]]) -> Any:
    return lambda **values: into.append(values)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def compile_decoder_runs():
    """--backend compile, eval: longest (3 steps) and max with a planted graph break (4 steps),
    with dynamo's recompile log and counters of each."""
    import torch
    from torch._dynamo.utils import counters

    torch._logging.set_logs(recompiles=True)
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    runs = {}
    try:
        for name, args in {
            "longest": ["--padding", "longest", "--steps", "3"],
            "max": ["--padding", "max", "--graph-break", "--steps", "4"],
        }.items():
            torch._dynamo.reset()
            counters.clear()
            handler = _Records()
            logger.addHandler(handler)
            steps: list[dict[str, Any]] = []
            with pytest.MonkeyPatch.context() as m:
                m.setattr(lazyscope, "annotate_step", _appender(steps))
                rc = D.main([*SMALL, "--backend", "compile", "--mode", "eval", *args])
            logger.removeHandler(handler)
            runs[name] = (rc, steps, handler.messages,
                          {k: dict(v) for k, v in counters.items()})
    finally:
        torch._logging.set_logs()
        torch._dynamo.reset()
    return runs


@pytest.mark.slow
def test_compile_longest_recompiles_on_the_sequence_dimension(compile_decoder_runs) -> None:
    rc, steps, recompiles, _ = compile_decoder_runs["longest"]
    assert rc == 0 and len(steps) == 3
    seq = [s["seq_len"] for s in steps]
    assert all(s["seq_len"] == s["batch_max_len"] for s in steps) and seq[0] != seq[1]
    assert recompiles, "pad-to-longest must recompile under torch.compile"
    text = recompiles[0]
    # the guard names a sequence dimension (index 1 of the (B, L) inputs, or 2/3 of the
    # (B, 1, L, L) mask) and the first step's padded length
    found = re.search(r"size mismatch at index (\d+)\. expected (\d+), actual (\d+)", text)
    assert found, text
    assert int(found.group(1)) in (1, 2, 3) and int(found.group(2)) == seq[0]
    assert int(found.group(3)) == seq[1]


@pytest.mark.slow
def test_compile_max_does_not_recompile_and_plants_the_graph_break(compile_decoder_runs) -> None:
    rc, steps, recompiles, counts = compile_decoder_runs["max"]
    assert rc == 0 and len(steps) == 4
    assert {s["seq_len"] for s in steps} == {32}
    assert recompiles == []
    breaks = counts.get("graph_break", {})
    assert any("graph_break()" in reason for reason in breaks), breaks
