"""How DbtHarness chooses what to run and how it judges the result (no dbt needed)."""

from __future__ import annotations

import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.evidence.redact import MASK
from patchit.harnesses.dbt_units import (
    DbtOutcome,
    judge_outcome,
    node_selector,
    replay_env,
    select_units,
)


@pytest.mark.parametrize(
    ("unique_id", "selector"),
    [
        ("model.shop.orders", "orders"),
        ("model.shop.orders.v2", "orders.v2"),
        ("seed.shop.raw_orders", "raw_orders"),
        ("test.shop.not_null_orders_order_id.5fb22c2710", "not_null_orders_order_id"),
        ("source.shop.raw.payments", "source:raw.payments"),
        ("shop", None),
        ("load_orders", None),
    ],
)
def test_node_selector(unique_id: str, selector: str | None) -> None:
    assert node_selector(unique_id) == selector


def test_select_units_adds_related_units_and_state() -> None:
    event = UniversalFailureEvent(
        source="dbt",
        pipeline_id="shop",
        unit_id="model.shop.orders",
        context={"related_units": ["model.shop.customers", "model.shop.orders"]},
    )
    assert select_units(event, with_state=False) == ["orders+", "customers+"]
    assert select_units(event, with_state=True)[-1] == "state:modified+"


def ok(unique_id: str, status: str = "success") -> dict[str, str]:
    return {"unique_id": unique_id, "status": status, "message": "", "resource_type": "model"}


def test_judge_outcome() -> None:
    unit = "model.shop.orders"
    good = DbtOutcome(success=True, results=[ok(unit), ok("test.shop.t.1", "pass")])
    assert judge_outcome(good, unit) == (True, [])
    failing = DbtOutcome(success=False, results=[ok(unit, "error"), ok("test.shop.t.1", "skipped")])
    assert judge_outcome(failing, unit) == (False, [unit, "test.shop.t.1"])
    # Green but the failed unit never ran (selected nothing): not a verified fix.
    assert judge_outcome(DbtOutcome(success=True, results=[ok("model.shop.x")]), unit) == (
        False,
        [unit],
    )
    assert judge_outcome(DbtOutcome(success=True), "shop") == (False, [])
    timed_out = DbtOutcome(success=True, results=[ok(unit)], timed_out=True)
    assert judge_outcome(timed_out, unit)[0] is False


def test_replay_env_drops_sandbox_paths_and_unknown_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DBT_ENV_SECRET_TOKEN", "from-patchit-env")
    monkeypatch.delenv("DBT_ENV_SECRET_OTHER", raising=False)
    dbt = DbtInvocation(
        command="build",
        project_dir="/p",
        cwd="/p",
        env={
            "DBT_PROFILES_DIR": "/home/dana/.dbt",
            "DBT_TARGET_PATH": "/p/target",
            "DBT_PARTIAL_PARSE_FILE_PATH": "/p/target/partial_parse.msgpack",
            "DBT_ENV_SECRET_TOKEN": MASK,
            "DBT_ENV_SECRET_OTHER": MASK,
            "DBT_ENV_CUSTOM_ENV_TEAM": "growth",
        },
    )
    event = UniversalFailureEvent(source="dbt", pipeline_id="p", unit_id="model.p.a", dbt=dbt)
    env = replay_env(event)
    assert env["DBT_ENV_CUSTOM_ENV_TEAM"] == "growth"
    assert env["DBT_ENV_SECRET_TOKEN"] == "from-patchit-env"
    assert "DBT_ENV_SECRET_OTHER" not in env
    assert "DBT_PROFILES_DIR" not in env and "DBT_TARGET_PATH" not in env
    assert "DBT_PARTIAL_PARSE_FILE_PATH" not in env  # the sandbox must not write the user's
    assert env["DBT_SEND_ANONYMOUS_USAGE_STATS"] == "false"
