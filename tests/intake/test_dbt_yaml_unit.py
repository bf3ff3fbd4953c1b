"""A YAML error's failing unit is its file, not a node or the whole project (no dbt run: the
messages are the ones dbt 1.11 gives, the project a folder made here)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from patchit.intake.dbt import events_from_run, yaml_error_file

SYNTAX = (
    "Parsing Error\n  Error reading billing: staging/schema.yml - Runtime Error\n"
    "  Syntax error near line 31\n  while parsing a flow sequence"
)
SCHEMA = (
    "Parsing Error\n  Invalid models config given in models/marts/schema.yml @ models: "
    "{'name': 'daily_revenue'} - at path ['columns'][0]['data_tests']: None is not of type "
    "'array'"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "dbt_project.yml").write_text(
        'name: billing\nprofile: billing\nmodel-paths: ["transform"]\n'
    )
    (tmp_path / "transform" / "staging").mkdir(parents=True)
    (tmp_path / "transform" / "staging" / "schema.yml").write_text("version: 2\n")
    return tmp_path


def test_dbt_names_the_file_relative_to_a_resource_path(project: Path) -> None:
    assert yaml_error_file(SYNTAX, project) == "transform/staging/schema.yml"


def test_a_schema_error_names_the_file_itself(project: Path) -> None:
    assert yaml_error_file(SCHEMA, project) == "models/marts/schema.yml"


def test_other_errors_have_no_yaml_unit(project: Path) -> None:
    text = "Compilation Error in model orders (models/orders.sql)\n  'amout' is undefined"
    assert yaml_error_file(text, project) is None


def test_the_event_of_a_yaml_parse_error_is_the_file(project: Path) -> None:
    record = {"exception": {"message": SYNTAX, "type": "ParsingError"}, "results": []}
    (event,) = events_from_run(record, ["parse"], project, project, "0" * 40, datetime.now(UTC))
    assert event.unit_id == "file:transform/staging/schema.yml"
    assert event.unit_path == "transform/staging/schema.yml"
    assert event.status == "parse_error"
