"""The JSON report's schema: generated from the report's dataclasses, shipped with the package,
and what real reports validate against (with the jsonschema library)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from lazyscope.analyze.ranks import build_any
from lazyscope.analyze.report import REPORT_SCHEMA
from lazyscope.render.json import render_json
from lazyscope.render.schema import SCHEMA_FILE, report_schema, schema_text
from lazyscope.store import load_target

DATA = Path(__file__).resolve().parents[1] / "data"
SAVED = ["xla/dynamic20", "xla/static20", "compile/tour", "v1/decoder_longest6", "v1/dynamic20",
         "v1/static20"]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _report_json(name: str, tmp_path: Path) -> dict:
    run = tmp_path / name.replace("/", "_")
    shutil.copytree(DATA / name, run)
    return json.loads(render_json(build_any(load_target(run))))


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "regenerate it: python -m lazyscope.render.schema > lazyscope/render/report.schema.json")


@pytest.mark.parametrize("name", SAVED)
def test_every_saved_run_validates(validator, name: str, tmp_path: Path) -> None:
    doc = _report_json(name, tmp_path)
    assert doc["schema_version"] == REPORT_SCHEMA
    assert list(validator.iter_errors(doc)) == []


def test_the_schema_catches_a_broken_report(validator, tmp_path: Path) -> None:
    doc = _report_json("xla/dynamic20", tmp_path)
    assert doc["findings"], "needs a report with a finding"
    for break_it in (lambda d: d.pop("verdict"),
                     lambda d: d.__setitem__("steps", "20"),
                     lambda d: d["findings"][0].pop("varying"),  # a recompile's own facts
                     lambda d: d["findings"][0]["stack"][0].pop("line"),
                     lambda d: d.__setitem__("schema_version", REPORT_SCHEMA + 1)):
        broken = copy.deepcopy(doc)
        break_it(broken)
        assert list(validator.iter_errors(broken)), break_it


def test_every_report_key_is_described() -> None:
    schema = report_schema()
    for key in ("verdict", "clean", "findings", "notes", "events", "compilations", "per_step",
                "steps", "median_step_seconds", "median_step_steps", "advice", "ranks"):
        assert key in schema["properties"], key
    assert "series" not in schema["properties"] and "recompiles" not in schema["properties"]
