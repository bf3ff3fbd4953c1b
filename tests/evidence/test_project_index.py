"""The project index is built from files alone, so it works when dbt cannot parse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from patchit.evidence.project_index import DBT_CONTEXT_NAMES, builtin_macros, index_project
from patchit.examples import SHOP

EXAMPLE = SHOP


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "shop"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (project / "models" / "staging" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: crm\n    tables:\n      - name: accounts\n"
        "      - name: contacts\n"
    )
    (project / "snapshots").mkdir()
    (project / "snapshots" / "orders_snap.sql").write_text(
        "{% snapshot orders_snapshot %}\nselect * from {{ ref('orders') }}\n{% endsnapshot %}\n"
    )
    pkg = project / "dbt_packages" / "dbt_utils_src"
    (pkg / "macros").mkdir(parents=True)
    (pkg / "dbt_project.yml").write_text("name: dbt_utils\nversion: '1.1.1'\n")
    (pkg / "macros" / "sql.sql").write_text(
        "{% macro safe_divide(a, b) %}{{ a }} / nullif({{ b }}, 0){% endmacro %}\n"
        "{%- macro star(from) -%}*{%- endmacro -%}\n"
    )
    return project


def test_index_lists_project_names_from_files(tmp_path: Path) -> None:
    index = index_project(_project(tmp_path))
    assert index.project_name == "shop"
    assert "orders" in index.models and "stg_payments" in index.models
    assert index.seeds == ["raw_customers", "raw_orders", "raw_payments"]
    assert index.snapshots == ["orders_snapshot"]
    assert index.sources == [("crm", "accounts"), ("crm", "contacts")]
    assert index.packages == ["dbt_utils"]
    assert "cents_to_dollars" in index.macros
    assert {"dbt_utils.safe_divide", "dbt_utils.star"} <= set(index.macros)
    assert "safe_divide" not in index.macros  # package macros need their namespace


def test_index_includes_dbt_context_and_installed_adapter_macros(tmp_path: Path) -> None:
    index = index_project(_project(tmp_path))
    assert set(DBT_CONTEXT_NAMES) <= set(index.macros)
    assert {"ref", "source", "var", "env_var", "is_incremental", "run_query"} <= set(index.macros)
    # from the installed dbt global_project and dbt-duckdb include dirs
    assert {"generate_schema_name", "dateadd", "safe_cast"} <= set(builtin_macros())
    assert "generate_schema_name" in index.macros


def test_index_survives_a_broken_project_and_honours_custom_paths(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "sql" / "core").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: p\nmodel-paths: [sql]\nmacro-paths: [m]\n")
    (project / "sql" / "core" / "a.sql").write_text("select 1")
    (project / "sql" / "core" / "b.py").write_text("def model(dbt, s): ...")
    (project / "sql" / "core" / "bad.yml").write_text("models: [unclosed\n")
    (project / "m").mkdir()
    (project / "m" / "x.sql").write_text("{% macro my_macro() %}1{% endmacro %}")
    index = index_project(project)
    assert index.models == ["a", "b"]
    assert index.model_paths == ["sql"]
    assert "my_macro" in index.macros
    assert index_project(tmp_path / "missing").models == []


def test_manifest_adds_names_the_files_do_not_show(tmp_path: Path) -> None:
    project = _project(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "nodes": {
                    "model.shop.legacy": {"resource_type": "model", "name": "legacy"},
                    "seed.shop.codes": {"resource_type": "seed", "name": "codes"},
                },
                "sources": {
                    "source.shop.erp.items": {"source_name": "erp", "name": "items"},
                },
                "macros": {
                    "macro.shop.fmt": {"package_name": "shop", "name": "fmt"},
                    "macro.audit.log_run": {"package_name": "audit", "name": "log_run"},
                    "macro.dbt.ref": {"package_name": "dbt", "name": "ref"},
                },
            }
        )
    )
    index = index_project(project, manifest)
    assert "legacy" in index.models and "codes" in index.seeds
    assert ("erp", "items") in index.sources
    assert "fmt" in index.macros and "audit.log_run" in index.macros
    assert index.macros.count("ref") == 1
