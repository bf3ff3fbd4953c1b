"""A unit test that errors on its model's SQL is located in the model's file: `dbt build`
runs the unit test before the model, so on a project with unit tests (the jaffle shop) a
broken model reports only through its unit test, whose own file is YAML."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from patchit.intake.dbt import events_from_run

UNIT = "unit_test.shop.stg_locations.test_opened_at_truncs_to_date"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "shop"
    (project / "target").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    manifest = {
        "metadata": {"project_name": "shop"},
        "nodes": {
            "model.shop.stg_locations": {"name": "stg_locations", "resource_type": "model",
                                         "original_file_path": "models/stg_locations.sql"},
            "seed.shop.stg_locations": {"name": "stg_locations", "resource_type": "seed",
                                        "original_file_path": "seeds/stg_locations.csv"},
        },
        "unit_tests": {UNIT: {
            "model": "stg_locations", "original_file_path": "models/stg_locations.yml",
            "depends_on": {"nodes": ["seed.shop.stg_locations", "model.shop.stg_locations"]},
        }},
    }  # fmt: skip
    (project / "target" / "manifest.json").write_text(json.dumps(manifest))
    return project


def _event_path(project: Path, status: str, message: str) -> str | None:
    started = datetime.now(UTC)
    os.utime(project / "target" / "manifest.json", (time.time() + 1, time.time() + 1))
    record = {"results": [{"unique_id": UNIT, "status": status, "message": message,
                           "original_file_path": "models/stg_locations.yml"}]}  # fmt: skip
    [event] = events_from_run(record, ["build"], project, project, None, started)
    return event.unit_path


def test_a_unit_test_that_errors_is_its_models_sql(tmp_path: Path) -> None:
    project = _project(tmp_path)
    message = 'Parser Error: syntax error at or near "tax_rate"'
    assert _event_path(project, "error", message) == "models/stg_locations.sql"


def test_a_unit_test_whose_rows_disagree_stays_its_yaml(tmp_path: Path) -> None:
    # the expected rows its owners wrote may be what the change should update
    project = _project(tmp_path)
    assert _event_path(project, "fail", "actual differs from expected") == (
        "models/stg_locations.yml"
    )


def test_no_manifest_keeps_the_unit_tests_own_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "target" / "manifest.json").unlink()
    record = {"results": [{"unique_id": UNIT, "status": "error", "message": "Parser Error",
                           "original_file_path": "models/stg_locations.yml"}]}  # fmt: skip
    [event] = events_from_run(record, ["build"], project, project, None, datetime.now(UTC))
    assert event.unit_path == "models/stg_locations.yml"
