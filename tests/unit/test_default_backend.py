"""Which backend `lazyscope trace` runs a target on when `--backend` is not given (pure: reads
the script's source, imports nothing of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyscope.backends.runner import Target, default_backend, imported_packages


@pytest.mark.parametrize(("source", "backend"), [
    ("import torchax\n", "torchax"),
    ("from torchax import interop\n", "torchax"),
    ("def main():\n    import torchax.interop as ti\n", "torchax"),
    ("import torchax\nimport torch_xla\n", "xla"),
    ("import torch_xla.core.xla_model as xm\n", "xla"),
    ("import torch\n", "xla"),
    ("from . import torchax\n", "xla"),  # a relative import is the program's own module
    ("this is not python(\n", "xla"),
])
def test_a_script_importing_torchax_and_not_torch_xla_runs_on_torchax(
        tmp_path: Path, source: str, backend: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert default_backend(Target("script", str(script), script)) == backend


def test_a_scenario_keeps_xla_and_imports_are_found_at_any_depth() -> None:
    assert default_backend(Target("scenario", "decoder", Path("/nonexistent"))) == "xla"
    assert imported_packages("import a.b, c\nfrom d.e import f\nif x:\n    import g\n") == \
        {"a", "c", "d", "g"}
