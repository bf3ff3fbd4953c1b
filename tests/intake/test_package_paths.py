"""A failing node of a package under dbt_packages/ is located in its file (issue 28, item 7):
dbt gives its `original_file_path` relative to the package, not the project."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.evidence.packages import package_path
from patchit.evidence.unit_files import dependency_files
from patchit.intake.dbt import events_from_run


def _project(tmp_path: Path, install: str = "") -> Path:
    project = tmp_path / "ledger"
    folder = project / (install or "dbt_packages") / "stripe_source_v2" / "models"
    folder.mkdir(parents=True)
    (folder / "stg_stripe__charge.sql").write_text("select 1\n")
    (folder.parent / "dbt_project.yml").write_text("name: stripe_source\n")
    (project / "models").mkdir()
    (project / "models" / "stg_stripe__charge.sql").write_text("select 2\n")  # a namesake
    extra = f"packages-install-path: {install}\n" if install else ""
    (project / "dbt_project.yml").write_text(f"name: ledger\nprofile: ledger\n{extra}")
    return project


def test_a_package_node_is_located_under_its_install_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    record = {"results": [{
        "unique_id": "model.stripe_source.stg_stripe__charge", "status": "error",
        "original_file_path": "models/stg_stripe__charge.sql",
        "message": "Binder Error: No function matches the given name and argument types",
    }]}  # fmt: skip
    [event] = events_from_run(record, ["build"], project, tmp_path, None, datetime.now(UTC))
    assert event.unit_path == "ledger/dbt_packages/stripe_source_v2/models/stg_stripe__charge.sql"


def test_the_projects_own_node_and_a_custom_install_path(tmp_path: Path) -> None:
    project = _project(tmp_path, install="vendor")
    own = package_path(project, "ledger", "model.ledger.stg_stripe__charge",
                       "models/stg_stripe__charge.sql")  # fmt: skip
    assert own == "models/stg_stripe__charge.sql"
    theirs = package_path(project, "ledger", "model.stripe_source.stg_stripe__charge",
                          "models/stg_stripe__charge.sql")  # fmt: skip
    assert theirs == "vendor/stripe_source_v2/models/stg_stripe__charge.sql"
    missing = package_path(project, "ledger", "model.other_pkg.x", "models/x.sql")
    assert missing == "models/x.sql"


def test_a_models_dependency_on_a_package_model_is_its_installed_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    manifest = {
        "metadata": {"project_name": "ledger"},
        "nodes": {
            "model.ledger.int_charges": {
                "original_file_path": "models/int_charges.sql",
                "depends_on": {"nodes": ["model.stripe_source.stg_stripe__charge"]},
            },
            "model.stripe_source.stg_stripe__charge": {
                "original_file_path": "models/stg_stripe__charge.sql",
            },
        },
    }
    (project / "manifest.json").write_text(json.dumps(manifest))
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="ledger", unit_id="model.ledger.int_charges",
        status="error", artifacts={"manifest": str(project / "manifest.json")},
        dbt=DbtInvocation(command="build", project_dir=str(project), cwd=str(project)),
    )  # fmt: skip
    evidence = Evidence(event=event, repo_root=str(project), project_dir=".")
    package_file = "dbt_packages/stripe_source_v2/models/stg_stripe__charge.sql"
    changed = [package_file, "packages.yml"]
    assert dependency_files(evidence, changed) == [package_file]
