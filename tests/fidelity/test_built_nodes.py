"""The data check's nodes: which file each built relation comes from, a package's included."""

from __future__ import annotations

import json
from pathlib import Path

from patchit.fidelity.outputs import built_nodes


def _target(tmp_path: Path) -> Path:
    target = tmp_path / "target"
    target.mkdir()
    nodes = {
        "model.ledger.charges": {"original_file_path": "models/charges.sql", "schema": "main",
                                 "name": "charges"},
        "model.stripe_source.stg_stripe__charge": {
            "original_file_path": "models/stg_stripe__charge.sql", "schema": "main",
            "name": "stg_stripe__charge"},
    }  # fmt: skip
    manifest = {"metadata": {"project_name": "ledger"}, "nodes": nodes}
    (target / "manifest.json").write_text(json.dumps(manifest))
    results = [{"unique_id": uid, "status": "success"} for uid in nodes]
    (target / "run_results.json").write_text(json.dumps({"results": results}))
    return target


def test_a_package_model_is_read_from_where_dbt_deps_installed_it(tmp_path: Path) -> None:
    project = tmp_path / "repo" / "dbt"
    installed = project / "dbt_packages" / "stripe_source"
    (installed / "models").mkdir(parents=True)
    (installed / "dbt_project.yml").write_text("name: stripe_source\n")
    (installed / "models" / "stg_stripe__charge.sql").write_text("select 1\n")
    nodes = built_nodes(_target(tmp_path), Path("dbt"), project)
    # a package upgrade's kept lines are keyed by this path: the relation's columns they meant
    assert nodes["model.stripe_source.stg_stripe__charge"].file == (
        "dbt/dbt_packages/stripe_source/models/stg_stripe__charge.sql"
    )
    assert nodes["model.ledger.charges"].file == "dbt/models/charges.sql"
    # without the checkout (older callers) the paths are dbt's own
    (tmp_path / "x").mkdir()
    bare = built_nodes(_target(tmp_path / "x"), Path("dbt"))
    assert (
        bare["model.stripe_source.stg_stripe__charge"].file == "dbt/models/stg_stripe__charge.sql"
    )
