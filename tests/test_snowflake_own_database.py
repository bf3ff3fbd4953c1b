"""A database of patchit's own on the Snowflake emulator (fakesnow, tests/sf_server.py):
with `[sandbox] sf_database = "auto"`, a heal clones the user's database (`create database ...
clone`), builds its candidates' sandbox schemas there, and reads the upstream from the clone
(`--defer` against the manifest rewritten to name it). The emulator makes database clones
empty, so the clone is completed relation by relation, and the report says so; it does not
parse `drop database`, so the clone is emptied and left, and the report says that too. The
user's database: every relation's rows the same before and after, and no sandbox schema made
in it at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchit.examples import SHOP
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import commit_all, git
from tests.sf_server import (
    SfServer,
    database_state,
    new_database,
    sandbox_schemas,
    shop_on_snowflake,
)

pytestmark = pytest.mark.slow

DAILY = "models/marts/daily_revenue.sql"


@pytest.fixture(autouse=True)
def _operator_settings(_patchit_home: Path) -> None:
    _patchit_home.mkdir(parents=True, exist_ok=True)
    (_patchit_home / "patchit.toml").write_text(
        '[sandbox]\nsf_role = "PATCHIT_SANDBOX"\nsf_database = "auto"\n'
    )


def _databases(sf: SfServer, database: str) -> list[str]:
    rows = sf.query(database, "select database_name from information_schema.databases")
    return sorted(str(r[0]) for r in rows if str(r[0]).startswith("PATCHIT_DB_"))


def test_a_column_typo_is_healed_in_a_database_of_patchits_own(
    sf: SfServer, tmp_path: Path
) -> None:
    database = new_database()
    repo = shop_on_snowflake(tmp_path, sf, database, SHOP)
    daily = repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount) as revenue", "sum(amont) as revenue"))
    commit_all(repo, "daily_revenue: revenue per day")
    before = database_state(sf, database)
    known = _databases(sf, database)
    res = patchit_dbt(repo, "build", "--select", "daily_revenue")
    assert res.returncode == 1, res.stderr
    [incident] = incidents()
    report = Path(incident["report_md"]).read_text()
    assert (incident["status"], incident["classification"]) == ("fixed", "code_bug"), report
    assert "sum(amount) as revenue" in git(repo, "show", f"{incident['branch']}:{DAILY}")
    assert "data check: same as baseline" in res.stderr
    found = re.search(r"; Snowflake: built in schema PATCHIT_[A-Z0-9]+_C\d+ of database "
                      r"(PATCHIT_DB_[0-9A-F]{12}), dropped afterwards \(\1, patchit's "
                      rf"zero-copy clone of database {database}", report)  # fmt: skip
    assert found, report
    assert "cloned one by one: the emulator's database clones are empty" in report
    assert "upstream read live from the clone's relations (--defer)" in report
    # the clone was made for this heal, and emptied (the emulator cannot drop a database)
    [made] = sorted(set(_databases(sf, database)) - set(known))
    assert made == found.group(1)
    assert f"database {made} left empty: the server refused `drop database`" in res.stderr
    assert sandbox_schemas(sf, made) == []
    # nothing was made in the user's database, and every relation of it is as it was
    assert sandbox_schemas(sf, database) == []
    assert database_state(sf, database) == before
    assert git(repo, "status", "--porcelain") == ""
