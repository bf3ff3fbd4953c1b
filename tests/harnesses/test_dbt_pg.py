"""The Postgres guard's pieces, without a server: the `dbt ls` it runs and how it reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.harnesses.dbt_pg import check_schemas, listing_args
from patchit.sandbox.postgres import (
    PASSWORD_ENV,
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
    assert args[-5:] == ["--output", "json", "--output-keys", "unique_id", "schema"]


def test_check_schemas_accepts_the_sandbox_and_its_custom_schemas() -> None:
    listing = "\n".join(
        [
            "20:01:02  Running with dbt=1.11.0",  # log lines around the JSON are ignored
            _line("model.shop.orders", SCHEMA),
            _line("model.shop.daily", f"{SCHEMA}_marts"),
            "{not json",
        ]
    )
    assert check_schemas(listing, SCHEMA) == 2
    with pytest.raises(HarnessError, match="listed no node"):
        check_schemas("20:01:02  Running with dbt=1.11.0\n", SCHEMA)
    # an empty selection (a YAML file's unit, state:modified+ matching nothing) builds nothing
    empty = "21:28:35  The selection criterion 'state:modified+' does not match any enabled "
    assert check_schemas(f"{empty}nodes\n21:28:35  No nodes selected!\n", SCHEMA) == 0


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
