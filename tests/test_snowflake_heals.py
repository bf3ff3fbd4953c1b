"""End to end on the Snowflake emulator (fakesnow, tests/sf_server.py), through `patchit dbt
-- build` as a user runs it: a ref typo is fixed on a verified branch with every relation of
the user's schemas the same before and after; a failing test on bad data (after a green run, a
loader wrote a customer without an email) is escalated as a data issue, the failing rows in
the report with their key, read without writing anything; a heal killed with SIGKILL while it
verifies leaves its sandbox schema, and the next heal sweeps it. The column typo, the
incremental model and the sweep's rules are tests/test_snowflake.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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

SEGMENTS = "models/marts/customer_segments.sql"


@pytest.fixture(autouse=True)
def _operator_role(_patchit_home: Path) -> None:
    _patchit_home.mkdir(parents=True, exist_ok=True)
    (_patchit_home / "patchit.toml").write_text('[sandbox]\nsf_role = "PATCHIT_SANDBOX"\n')


def test_a_ref_typo_on_snowflake_is_fixed_and_the_users_schemas_are_untouched(
    sf: SfServer, tmp_path: Path
) -> None:
    database = new_database()
    repo = shop_on_snowflake(tmp_path, sf, database, SHOP)
    segments = repo / SEGMENTS
    segments.write_text(segments.read_text().replace("ref('customers')", "ref('customer')"))
    commit_all(repo, "customer_segments: segments")
    before = database_state(sf, database)
    assert before["ANALYTICS.CUSTOMER_SEGMENTS"][0] > 0  # type: ignore[index]
    res = patchit_dbt(repo, "build", "--select", "customer_segments")
    assert res.returncode != 0, res.stderr  # dbt's own exit code
    assert "Traceback" not in res.stderr
    [incident] = incidents()
    assert (incident["status"], incident["classification"]) == ("fixed", "code_bug"), res.stderr
    assert "ref('customers')" in git(repo, "show", f"{incident['branch']}:{SEGMENTS}")
    report = Path(incident["report_md"]).read_text()
    assert "its grants not read: the emulator (fakesnow) has no access control" in report
    assert database_state(sf, database) == before  # every relation's rows, hashed
    assert sandbox_schemas(sf, database) == []
    assert git(repo, "status", "--porcelain") == ""


def test_a_failing_test_on_bad_data_is_escalated_with_its_keyed_rows(
    sf: SfServer, tmp_path: Path
) -> None:
    database = new_database()
    repo = shop_on_snowflake(tmp_path, sf, database, SHOP)
    (repo / "README.md").write_text("# shop\n")
    commit_all(repo, "readme")  # the last change touches nothing the test reads
    green = patchit_dbt(repo, "build", "--select", "stg_customers")  # yesterday's run
    assert green.returncode == 0 and incidents() == [], green.stderr
    sf.query(database, f"insert into {database}.analytics.raw_customers values "
                       "(99, 'Eve', 'Nobody', null, '2024-02-01')")  # fmt: skip
    before = database_state(sf, database)
    res = patchit_dbt(repo, "build", "--select", "stg_customers")
    assert res.returncode == 1, res.stderr
    [incident] = incidents()
    report = Path(incident["report_md"]).read_text()
    assert (incident["status"], incident["classification"]) == ("escalated", "data_issue"), report
    # the row, found by its key: the customer's id first, the tested column NULL
    header = next(line for line in report.splitlines() if "| EMAIL |" in line.upper())
    cells = [c.strip().upper() for c in header.strip("|").split("|")]
    assert cells[:2] == ["CUSTOMER_ID", "EMAIL"], header
    assert "| 99 | NULL |" in report, report
    assert "not sampled" not in report
    assert database_state(sf, database) == before
    assert sandbox_schemas(sf, database) == []
    assert git(repo, "branch", "--list", "patchit/*") == ""


def test_a_heal_killed_while_it_verifies_leaves_its_schema_and_the_next_heal_sweeps_it(
    sf: SfServer, tmp_path: Path
) -> None:
    database = new_database()
    repo = shop_on_snowflake(tmp_path, sf, database, SHOP)
    segments = repo / SEGMENTS
    segments.write_text(segments.read_text().replace("ref('customers')", "ref('customer')"))
    commit_all(repo, "customer_segments: segments")
    before = database_state(sf, database)
    cmd = [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(repo), "--", "build",
           "--select", "customer_segments", "--profiles-dir", str(repo)]  # fmt: skip
    heal = subprocess.Popen(cmd, cwd=repo, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not (left := sandbox_schemas(sf, database)):
            assert heal.poll() is None, "the heal ended before it made a sandbox schema"
            assert time.monotonic() < deadline, "no sandbox schema within 600 s"
            time.sleep(0.3)
    finally:
        os.killpg(heal.pid, signal.SIGKILL)  # the heal and everything it started
        heal.wait()
    # nothing dropped them (the heal may have made one more, the candidate's beside the
    # baseline's, between the look and the kill)
    assert set(left) <= set(sandbox_schemas(sf, database))
    res = patchit_dbt(repo, "build", "--select", "customer_segments")
    assert res.returncode != 0, res.stderr
    assert "Traceback" not in res.stderr
    assert sandbox_schemas(sf, database) == []  # the killed heal's swept, the new one's dropped
    assert database_state(sf, database) == before
