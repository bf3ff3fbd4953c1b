"""The example projects `patchit demo` copies, shipped inside the package so that an installed
patchit runs the demo too: `shop` (a dbt project on DuckDB) and `airflow` (a project holding a
`dags/` folder). patchit's own tests use them as well."""

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
SHOP = EXAMPLES / "shop"
AIRFLOW_PROJECT = EXAMPLES / "airflow"
