"""`bench --warehouse postgres`'s pieces that need no server: the retargeted profile, the
DuckDB check SQL made portable, the selection of scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from patchit.bench.corpus import DEFAULT_CORPUS, run_corpus
from patchit.bench.corpus_model import load_corpus
from patchit.bench.corpus_pg import PgBench
from patchit.bench.corpus_wh import _ORDER_BY_ALL
from patchit.bench.pg_server import PgCluster
from patchit.errors import BadInputError

SCHEMA_ENV = PgBench.SCHEMA_ENV
CLUSTER = PgCluster("127.0.0.1", 6543, "postgres", Path("/nowhere"), Path("/nowhere"))


def test_the_profile_is_retargeted_with_a_schema_per_checkout(tmp_path: Path) -> None:
    project = DEFAULT_CORPUS.parent / "projects" / "billing"
    pg = PgBench(CLUSTER)
    copy = pg.retarget(project, tmp_path / "billing")
    profile = yaml.safe_load((copy / "profiles.yml").read_text())["billing"]
    output = profile["outputs"][profile["target"]]
    assert output["type"] == "postgres" and output["port"] == 6543
    assert output["schema"] == "{{ env_var('" + SCHEMA_ENV + "') }}"
    assert (copy / "models").is_dir() and not list(copy.glob("*.duckdb"))
    one, two = pg.schema_of(tmp_path / "user"), pg.schema_of(tmp_path / "reference")
    assert one != two and pg.env(tmp_path / "user") == {SCHEMA_ENV: one}


@pytest.mark.parametrize(
    ("sql", "portable"),
    [
        ("select * from revenue_by_country order by all", "select * from revenue_by_country"),
        ("select a from t ORDER BY ALL;", "select a from t"),
        ("select (select 1), (select 2)", "select (select 1), (select 2)"),
    ],
)
def test_duckdbs_order_by_all_is_dropped(sql: str, portable: str) -> None:
    assert _ORDER_BY_ALL.sub("", sql) == portable


def test_postgres_runs_only_dbt_scenarios_that_make_sense_there() -> None:
    scenarios = load_corpus(DEFAULT_CORPUS, None)
    duckdb_only = {s.name for s in scenarios if "postgres" not in s.warehouses}
    assert {"dbt_db_locked", "dbt_data_file_seed_date_format"} <= duckdb_only
    assert all(s.kind == "dbt" for s in scenarios if s.name in duckdb_only)
    with pytest.raises(BadInputError, match="none of the chosen scenarios runs on Postgres"):
        run_corpus(DEFAULT_CORPUS, ["af_key_typo", "dbt_db_locked"], warehouse="postgres")
