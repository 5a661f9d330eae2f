"""Built-in scenarios: standalone scripts, each runnable as
``python -m lazyscope.scenarios.NAME --help`` (or by path).

``lazyscope trace NAME`` runs the script exactly as ``lazyscope trace path/to/script.py`` runs a
user's own: the scenarios are no more privileged than user code. This registry only names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    file: str
    description: str

    @property
    def path(self) -> Path:
        return HERE / self.file


SCENARIOS: dict[str, ScenarioInfo] = {
    s.name: s
    for s in [
        ScenarioInfo(
            "lazytensor-dynamic",
            "lazytensor_dynamic.py",
            "LazyTensor blog's dummy_step: a static graph vs a torch.cat-accumulated loss "
            "that changes the graph every step (--mode static|dynamic)",
        ),
        ScenarioInfo(
            "decoder",
            "decoder.py",
            "GPT-style decoder on variable-length sequences: padding policies max, longest, "
            "pow2, bucket:B1,..|auto, packed (--padding), --mode train|eval, --preset tiny|seed",
        ),
        ScenarioInfo(
            "hf-gpt2",
            "hf_gpt2.py",
            "Hugging Face transformers GPT-2 (built from code, sdpa) on variable-length "
            "sequences: the decoder's --padding policies, packed rows by position_ids (needs "
            "transformers: lazyscope[hf])",
        ),
    ]
}
