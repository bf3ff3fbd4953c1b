"""The Postgres guard's pieces, without a server: the `dbt ls` it runs and how it reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.harnesses.dbt.pg import check_schemas, listing_args, seed_incrementals, warehouse_note
from patchit.harnesses.dbt.units import DbtSandbox
from patchit.sandbox.postgres import (
    PASSWORD_ENV,
    Copied,
    PgWarehouse,
    connect_args,
    sandbox_output,
    sandbox_schema,
)

SCHEMA = "patchit_0123456789ab"


def _line(uid: str, schema: str) -> str:
    return json.dumps({"unique_id": uid, "schema": schema})


def test_listing_args_list_what_the_build_selects() -> None:
    build = ["build", "--select", "orders+", "--defer", "--state", "/s", "--target-path", "/t"]
    args = listing_args(build)
    assert args[:7] == ["ls", "--select", "orders+", "--defer", "--state", "/s", "--target-path"]
    assert args.count("--resource-type") == 4
    assert args[-8:] == [
        "--output", "json", "--output-keys", "unique_id", "schema", "alias", "resource_type",
        "config",
    ]  # fmt: skip


def test_check_schemas_accepts_the_sandbox_and_its_custom_schemas() -> None:
    listing = "\n".join(
        [
            "20:01:02  Running with dbt=1.11.0",  # log lines around the JSON are ignored
            _line("model.shop.orders", SCHEMA),
            _line("model.shop.daily", f"{SCHEMA}_marts"),
            "{not json",
        ]
    )
    assert [n["unique_id"] for n in check_schemas(listing, SCHEMA)] == [
        "model.shop.orders", "model.shop.daily",
    ]  # fmt: skip
    with pytest.raises(HarnessError, match="listed no node"):
        check_schemas("20:01:02  Running with dbt=1.11.0\n", SCHEMA)
    # an empty selection (a YAML file's unit, state:modified+ matching nothing) builds nothing
    empty = "21:28:35  The selection criterion 'state:modified+' does not match any enabled "
    assert check_schemas(f"{empty}nodes\n21:28:35  No nodes selected!\n", SCHEMA) == []


@pytest.mark.parametrize("where", ["analytics", "marts", "patchit_0123456789abc", "patchit_x"])
def test_check_schemas_refuses_a_build_outside_the_sandbox(where: str) -> None:
    listing = "\n".join([_line("model.shop.orders", SCHEMA), _line("model.shop.daily", where)])
    said = f"model.shop.daily would be built into schema '{where}'"
    with pytest.raises(HarnessError, match=said):
        check_schemas(listing, SCHEMA)


def test_the_sandbox_schema_is_stable_per_scratch_dir_and_differs_between_them(
    tmp_path: Path,
) -> None:
    one, two = sandbox_schema(tmp_path / "c1"), sandbox_schema(tmp_path / "c2")
    assert one == sandbox_schema(tmp_path / "c1") and one != two
    assert one.startswith("patchit_") and len(one) == len("patchit_") + 12


def test_the_password_goes_to_the_connection_not_to_the_profile() -> None:
    output = {"type": "postgres", "host": "db", "port": 5433, "user": "u", "pass": "pw",
              "dbname": "wh", "schema": "analytics", "threads": 4}  # fmt: skip
    written = sandbox_output(output, SCHEMA)
    assert "pw" not in json.dumps(written)
    assert written["password"] == "{{ env_var('" + PASSWORD_ENV + "') }}"
    assert written["schema"] == SCHEMA and written["threads"] == 4
    args = connect_args(output)
    assert args["password"] == "pw" and args["dbname"] == "wh" and args["port"] == 5433
    assert "schema" not in args and "threads" not in args


def _listed(uid: str, kind: str, **config: object) -> dict[str, object]:
    return {"unique_id": uid, "schema": SCHEMA, "alias": uid.rpartition(".")[2],
            "resource_type": kind, "config": config}  # fmt: skip


class _NoServer(PgWarehouse):
    """A warehouse whose every copy is recorded, not made."""

    def __init__(self) -> None:
        super().__init__({"type": "postgres", "dbname": "wh", "schema": "analytics"})
        self.copies: list[tuple[tuple[str, str], tuple[str, str]]] = []
        self.limits: list[int] = []

    def copy_table(
        self,
        sandbox: str,
        source: tuple[str, str],
        dest: tuple[str, str],
        limit_bytes: int,
        owner: str | None = None,
    ) -> Copied:
        assert sandbox == SCHEMA and owner is None
        self.copies.append((source, dest))
        if source[1] == "locked":
            raise HarnessError("postgres db:5432/wh: canceling statement due to lock timeout")
        if source[1] == "huge":
            return Copied(None, "too big", 10)
        self.limits.append(limit_bytes)
        if limit_bytes < 10:
            return Copied(None, f"10 bytes, above the copy limit ({limit_bytes} bytes)", 10)
        return Copied(3, "", 10, rows_only=source[1] == "generated")


def _box(tmp_path: Path, *args: str) -> DbtSandbox:
    names = ("log", "table", "always", "huge", "locked", "generated", "never", "moved")
    nodes = {f"model.shop.{n}": {"resource_type": "model", "database": "wh",
                                 "schema": "analytics", "alias": n} for n in names}  # fmt: skip
    nodes["model.shop.marts_log"] = {"resource_type": "model", "database": "wh",
                                     "schema": "analytics_marts", "alias": "marts_log"}  # fmt: skip
    nodes["snapshot.shop.snap"] = {"resource_type": "snapshot", "database": "wh",
                                   "schema": "analytics_snaps", "alias": "snap"}  # fmt: skip
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": nodes}))
    return DbtSandbox(
        args=["build", *args], cwd=tmp_path, log_path=tmp_path / "l", target_dir=tmp_path,
        parse_key="", project_dir=tmp_path, pg_schema=SCHEMA, state_manifest=manifest,
    )  # fmt: skip


LISTED = [
    _listed("model.shop.log", "model", materialized="incremental"),
    _listed("model.shop.table", "model", materialized="table"),
    _listed("model.shop.always", "model", materialized="incremental", full_refresh=True),
    _listed("model.shop.never", "model", materialized="incremental", full_refresh=False),
    _listed("model.shop.huge", "model", materialized="incremental"),
    _listed("model.shop.locked", "model", materialized="incremental"),
    _listed("model.shop.generated", "model", materialized="incremental"),
    _listed("model.shop.new", "model", materialized="incremental"),  # not in the manifest
    {**_listed("snapshot.shop.snap", "snapshot", materialized="snapshot"),
     "schema": f"{SCHEMA}_snaps"},
    _listed("test.shop.not_null_log_id", "test", materialized="test"),
    {**_listed("model.shop.marts_log", "model", materialized="incremental"),
     "schema": f"{SCHEMA}_marts"},
    {**_listed("model.shop.moved", "model", materialized="incremental"), "alias": "moved_v2"},
]  # fmt: skip


def test_only_incremental_models_and_snapshots_are_seeded_with_the_users_table(
    tmp_path: Path,
) -> None:
    warehouse = _NoServer()
    notes = seed_incrementals(_box(tmp_path), LISTED, warehouse, 2**20)
    assert warehouse.copies == [
        (("analytics", "log"), (SCHEMA, "log")),
        (("analytics", "never"), (SCHEMA, "never")),
        (("analytics", "huge"), (SCHEMA, "huge")),
        (("analytics", "locked"), (SCHEMA, "locked")),
        (("analytics", "generated"), (SCHEMA, "generated")),
        (("analytics_snaps", "snap"), (f"{SCHEMA}_snaps", "snap")),
        (("analytics_marts", "marts_log"), (f"{SCHEMA}_marts", "marts_log")),
    ]
    unverified = "its incremental branch is not verified"
    assert notes == [
        "log built on a copy of analytics.log (3 rows)",
        "never built on a copy of analytics.never (3 rows)",
        f"huge built from scratch (too big): {unverified}",
        "locked built from scratch (the copy of analytics.locked failed: postgres "
        f"db:5432/wh: canceling statement due to lock timeout): {unverified}",
        "generated built on a copy of analytics.generated (3 rows, its rows only: no "
        "constraints or indexes)",
        "new built from scratch (the failing run's manifest places it in no relation of this "
        f"database): {unverified}",
        "snap built on a copy of analytics_snaps.snap (3 rows)",
        "marts_log built on a copy of analytics_marts.marts_log (3 rows)",
        "moved built from scratch (the candidate moves it from analytics.moved: the user's run "
        f"would too): {unverified}",
    ]
    box = DbtSandbox(**{**_box(tmp_path).__dict__, "pg_notes": notes})
    assert notes[0] in warehouse_note(box)


def test_the_copy_limit_is_the_runs_over_all_its_copies(tmp_path: Path) -> None:
    warehouse = _NoServer()
    notes = seed_incrementals(_box(tmp_path), LISTED, warehouse, 25)
    assert warehouse.limits[:3] == [25, 15, 5]  # what is left after each 10-byte copy
    assert notes[:2] == [
        "log built on a copy of analytics.log (3 rows)",
        "never built on a copy of analytics.never (3 rows)",
    ]
    assert notes[4] == (
        "generated built from scratch (10 bytes, above the copy limit (5 bytes), after 0.0 MB "
        "copied for this run): its incremental branch is not verified"
    )


def test_a_full_refresh_copies_only_what_it_does_not_rebuild(tmp_path: Path) -> None:
    warehouse = _NoServer()
    seed_incrementals(_box(tmp_path, "--full-refresh"), LISTED, warehouse, 2**20)
    assert [dest[1] for _, dest in warehouse.copies] == ["never", "snap"]


def test_a_copy_is_only_ever_made_into_the_callers_sandbox() -> None:
    warehouse = PgWarehouse({"type": "postgres"})
    for sandbox, dest in (
        (SCHEMA, "analytics"),
        (SCHEMA, "patchit_ba9876543210"),  # another sandbox
        ("analytics", "analytics"),
    ):
        with pytest.raises(HarnessError, match=r"refusing|not a patchit sandbox"):
            warehouse.copy_table(sandbox, ("a", "t"), (dest, "t"), 1)
