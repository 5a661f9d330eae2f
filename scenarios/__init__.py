"""lazyscope's built-in scenarios: standalone programs on lazyscope's public API only.

Each runs on its own (``python -m lazyscope_scenarios.NAME --help``) and under lazyscope
(``lazyscope trace NAME``), which runs it exactly as it runs a user's script: a scenario is no
more privileged than user code. In the repository they live in ``scenarios/``; installed, they
are the package ``lazyscope_scenarios`` (``pyproject.toml`` maps the one to the other). This
module only names them; importing it imports neither torch nor lazyscope.

A scenario's module defines ``build_parser()`` (its argparse parser: ``lazyscope trace`` checks
a scenario's arguments with it before anything runs, and tells an option of lazyscope's written
after the scenario from one of the scenario's own) and may define ``parse_args(argv)`` when its
arguments need checks beyond the parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ScenarioInfo:
    """A built-in scenario: its name on the command line, its module under this package, and
    a line for ``lazyscope scenarios``."""

    name: str
    module: str
    description: str

    @property
    def qualified(self) -> str:
        """The importable module (``python -m`` runs it)."""
        return f"{__name__}.{self.module}"

    @property
    def path(self) -> Path:
        """The file that runs: the module, or a package's ``__main__.py``."""
        package = HERE / self.module / "__main__.py"
        return package if package.is_file() else HERE / f"{self.module}.py"


SCENARIOS: dict[str, ScenarioInfo] = {
    s.name: s
    for s in [
        ScenarioInfo(
            "lazytensor-dynamic",
            "lazytensor_dynamic",
            "LazyTensor blog's dummy_step: a static graph vs a torch.cat-accumulated loss "
            "that changes the graph every step (--mode static|dynamic)",
        ),
        ScenarioInfo(
            "decoder",
            "decoder",
            "GPT-style decoder on variable-length sequences: padding policies max, longest, "
            "pow2, bucket:B1,..|auto, packed (--padding), attention variants (--attention), "
            "--mode train|eval, --preset tiny|seed",
        ),
        ScenarioInfo(
            "hf-gpt2",
            "hf_gpt2",
            "Hugging Face transformers GPT-2 (built from code, sdpa) on variable-length "
            "sequences: the decoder's --padding policies, packed rows by position_ids (needs "
            "transformers: lazyscope[hf])",
        ),
        ScenarioInfo(
            "compile-tour",
            "compile_tour",
            "torch.compile's findings in one short run: a step recompiled per length, a graph "
            "break at .item(), a function past the recompile limit (--backend compile|eager)",
        ),
    ]
}
