"""A run's DuckDB file opened while dbt starts (`duckdb_early`): dbt's own connect to it gets
the database opened early, other settings get a database opened as without it, and nothing
stays open after the run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from patchit.harnesses.dbt import duckdb_early
from patchit.harnesses.dbt.preparation import early_open_spec


@pytest.fixture(autouse=True)
def _pristine() -> Iterator[None]:
    """Each test installs the wrapper afresh; the process's `duckdb.connect` is put back."""
    connect = duckdb.connect
    yield
    duckdb_early.release()
    duckdb.connect = connect
    duckdb_early._real_connect = None
    duckdb_early._said("")


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create table orders as select 1 as id")
    return path


def _opened_by_another_process(path: Path) -> bool:
    """Whether another process can open `path` for writing (no lock held on it here)."""
    code = "import duckdb, sys; duckdb.connect(sys.argv[1]).close()"
    return subprocess.run([sys.executable, "-c", code, str(path)]).returncode == 0


def test_dbt_s_connect_gets_the_database_opened_early(
    db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert duckdb_early.open_early({"duckdb_early": {"path": str(db_file), "config": {}}})
    assert duckdb_early.outcome() == "opened"
    monkeypatch.chdir(db_file.parent)
    con = duckdb.connect("shop.duckdb", read_only=False, config={})  # as dbt-duckdb does
    try:
        assert duckdb_early.outcome() == "taken"
        assert duckdb_early._early is None  # the early connection is closed
        assert con.execute("select id from orders").fetchall() == [(1,)]
        con.execute("create table more as select 2 as id")
    finally:
        con.close()
    assert _opened_by_another_process(db_file)
    with duckdb.connect(str(db_file), read_only=True) as check:
        assert check.execute("select id from more").fetchall() == [(2,)]


def test_other_settings_open_the_file_as_without_it(db_file: Path) -> None:
    """DuckDB refuses a second connection with other settings while one is open: the early
    one is closed first, so the run's connect succeeds as it would have."""
    duckdb_early.open_early({"duckdb_early": {"path": str(db_file), "config": {}}})
    con = duckdb.connect(str(db_file), config={"threads": 1})
    try:
        assert duckdb_early.outcome() == "reopened"
        assert con.execute("select current_setting('threads')").fetchone() == (1,)
    finally:
        con.close()
    duckdb_early.open_early({"duckdb_early": {"path": str(db_file), "config": {}}})
    with duckdb.connect(str(db_file), read_only=True) as read_only:
        assert read_only.execute("select count(*) from orders").fetchone() == (1,)
    assert duckdb_early.outcome() == "reopened"


def test_another_database_is_left_alone(db_file: Path, tmp_path: Path) -> None:
    duckdb_early.open_early({"duckdb_early": {"path": str(db_file), "config": {}}})
    with duckdb.connect(str(tmp_path / "other.duckdb")) as other:
        other.execute("select 1")
    with duckdb.connect(":memory:") as memory:
        memory.execute("select 1")
    assert duckdb_early.outcome() == "opened"
    assert not _opened_by_another_process(db_file)  # still open here, early
    duckdb_early.release()
    assert duckdb_early.outcome() == "unused"
    assert _opened_by_another_process(db_file)


def test_a_symlinked_path_is_the_same_file(db_file: Path, tmp_path: Path) -> None:
    """A path reaching the file another way is the same database: never opened twice."""
    link = tmp_path / "link"
    link.mkdir()
    os.symlink(db_file, link / "shop.duckdb")
    duckdb_early.open_early({"duckdb_early": {"path": str(db_file), "config": {}}})
    with duckdb.connect(str(link / "shop.duckdb"), read_only=False, config={}) as con:
        assert con.execute("select id from orders").fetchall() == [(1,)]
    assert duckdb_early.outcome() in ("taken", "reopened")
    assert _opened_by_another_process(db_file)


@pytest.mark.parametrize(
    "spec",
    [
        None,
        "shop.duckdb",
        {"path": "shop.duckdb", "config": {}},  # relative: the run's cwd is not known here
        {"path": "/x/shop.duckdb", "config": ["threads"]},
        {"config": {}},
    ],
)
def test_a_request_without_a_usable_file_opens_nothing(spec: object) -> None:
    assert not duckdb_early.open_early({"duckdb_early": spec} if spec is not None else {})
    assert duckdb_early.outcome() == ""
    assert duckdb_early._real_connect is None  # nothing installed either


def test_a_file_that_cannot_be_opened_is_left_to_dbt(tmp_path: Path) -> None:
    missing_dir = tmp_path / "nowhere" / "shop.duckdb"
    duckdb_early.open_early({"duckdb_early": {"path": str(missing_dir), "config": {}}})
    with pytest.raises(duckdb.Error):  # dbt's own connect fails as it would have
        duckdb.connect(str(missing_dir), read_only=False, config={})
    assert duckdb_early.outcome() == "failed"


def test_the_harness_s_spec(tmp_path: Path) -> None:
    file = tmp_path / "shop.duckdb"
    assert early_open_spec(file, None) == {"path": str(file), "config": {}}
    assert early_open_spec(file, {"threads": 2}) == {"path": str(file), "config": {"threads": 2}}
    assert early_open_spec(file, ["threads"]) is None
    assert early_open_spec(file, {"threads": object()}) is None
    assert early_open_spec(file, {1: "x"}) is None
