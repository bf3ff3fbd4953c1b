"""Error fingerprints and cause keys: stable across runs, distinct across real differences."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.memory import cause_key, error_fingerprint, normalise_message, stable_unit_id

BINDER = (
    "Runtime Error in model {name} (models/marts/{name}.sql)\n"
    '  Binder Error: Referenced column "{col}" not found in FROM clause!\n'
    '  Candidate bindings: "order_date", "customer_id", "amount"\n'
    "  \n"
    "  LINE {line}:     {col},\n"
    "                   ^^^^^^^^"
)


def dbt_event(
    name: str = "orders",
    col: str = "order_dt",
    line: int = 4,
    root: str = "/srv/repos/shop",
    **overrides: Any,
) -> UniversalFailureEvent:
    fields: dict[str, Any] = {
        "source": "dbt",
        "pipeline_id": "shop",
        "unit_id": f"model.shop.{name}",
        "unit_path": f"models/marts/{name}.sql",
        "error_type": "Binder Error",
        "error_message": BINDER.format(name=name, col=col, line=line),
        "repo_path": root,
        "dbt": DbtInvocation(command="build", project_dir=root, cwd=root),
    }
    fields.update(overrides)
    return UniversalFailureEvent.model_validate(fields)


def test_same_failure_in_two_runs_has_one_fingerprint() -> None:
    first = dbt_event(
        run_id="0f8c2a9e-5b1d-4c3e-9a7f-2d6b8e1c4a50",
        commit="1" * 40,
        try_number=1,
        created_utc=datetime(2026, 1, 1, 3, 0, tzinfo=UTC),
        line=4,
        error_message=BINDER.format(name="orders", col="order_dt", line=4)
        + "\n03:00:01 compiled at /tmp/pytest-of-ci/pytest-7/test_a0/shop/target/orders.sql",
    )
    second = dbt_event(
        run_id="77aa0c13-0000-4c3e-9a7f-2d6b8e1c4a51",
        commit="2" * 40,
        try_number=2,
        created_utc=datetime(2026, 1, 2, 3, 0, tzinfo=UTC),
        error_message="\x1b[31m"
        + BINDER.format(name="orders", col="order_dt", line=9)
        + "\x1b[0m\n04:12:55 compiled at /tmp/pytest-of-ci/pytest-8/test_b1/shop/target/orders.sql",
    )
    assert first.event_id != second.event_id
    assert error_fingerprint(first) == error_fingerprint(second)
    assert cause_key(first) == cause_key(second)


def test_a_different_column_is_a_different_failure() -> None:
    dt, dx = dbt_event(col="order_dt"), dbt_event(col="order_dx")
    assert error_fingerprint(dt) != error_fingerprint(dx)
    assert cause_key(dt) != cause_key(dx)


def test_repository_location_does_not_matter() -> None:
    message = "Compilation Error in model orders ({root}/models/marts/orders.sql) at line 3"
    here = dbt_event(root="/home/dana/shop", error_message=message.format(root="/home/dana/shop"))
    there = dbt_event(root="/opt/ci/ws/shop", error_message=message.format(root="/opt/ci/ws/shop"))
    assert error_fingerprint(here) == error_fingerprint(there)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("source", "airflow"),
        ("pipeline_id", "other_project"),
        ("unit_id", "model.shop.customers"),
        ("error_type", "Compilation Error"),
    ],
)
def test_identity_fields_change_the_fingerprint(field: str, value: str) -> None:
    overrides: dict[str, Any] = {field: value}
    assert error_fingerprint(dbt_event()) != error_fingerprint(dbt_event(**overrides))


def test_dbt_test_hash_suffix_is_ignored() -> None:
    a = dbt_event(
        unit_id="test.shop.not_null_orders_order_id.5fb22c2710", error_type="test_failure"
    )
    b = dbt_event(
        unit_id="test.shop.not_null_orders_order_id.0a1b2c3d4e", error_type="test_failure"
    )
    other = dbt_event(unit_id="test.shop.unique_orders_order_id.5fb22c2710")
    assert stable_unit_id(a) == "test.shop.not_null_orders_order_id"
    assert error_fingerprint(a) == error_fingerprint(b)
    assert error_fingerprint(a) != error_fingerprint(
        other.model_copy(update={"error_type": "test_failure"})
    )


def test_nodes_failing_for_one_cause_share_a_cause_key_not_a_fingerprint() -> None:
    orders = dbt_event(name="orders", line=4)
    revenue = dbt_event(name="daily_revenue", line=12)
    assert error_fingerprint(orders) != error_fingerprint(revenue)
    assert cause_key(orders) == cause_key(revenue)


def test_repo_frames_count_but_their_line_numbers_do_not() -> None:
    tb = "Traceback:\n  File \"{root}/dags/etl.py\", line {n}, in {fn}\nKeyError: 'amount'"

    def airflow(n: int, fn: str = "transform") -> UniversalFailureEvent:
        return UniversalFailureEvent(
            source=FailureSource.AIRFLOW,
            pipeline_id="etl",
            unit_id="transform",
            error_type="KeyError",
            error_message="'amount'",
            repo_path="/srv/etl",
            traceback=tb.format(root="/srv/etl", n=n, fn=fn),
        )

    assert error_fingerprint(airflow(12)) == error_fingerprint(airflow(40))
    assert error_fingerprint(airflow(12)) != error_fingerprint(airflow(12, fn="load"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[31mFailure\x1b[0m   in\n model", "Failure in model"),
        ("at 2026-11-25T03:04:05.123+00:00 done", "at <ts> done"),
        ("on 2026-11-25 and 2026-11-25 10:00", "on <date> and <ts>"),
        ("23:33:58  Finished", "<time> Finished"),
        ("run manual__2026-11-25T03:04:05+00:00 failed", "run <run_id> failed"),
        ("scheduled__2026-11-25T00:00:00+00:00", "<run_id>"),
        ("id 123e4567-e89b-12d3-a456-426614174000 x", "id <uuid> x"),
        ("sha 3f2a9c1b7d8e and 9f8e7d6c", "sha <hex> and <hex>"),
        ("<object at 0x7f3a2b1c>", "<object at 0x<addr>>"),
        ("No such file: '/tmp/tmpa1b2c3d4/out/data.csv'", "No such file: '<tmp>/data.csv'"),
        ("in /var/folders/xy/T/abc/run.log", "in <tmp>/run.log"),
        ("/home/u/.cache/pytest-of-u/pytest-3/t0/x", "<tmp>"),
        ("/srv/state/patchit/worktrees/20261125-1a2b3c/models/o.sql", "<tmp>/o.sql"),
        ('File "etl.py", line 12, in run', 'File "etl.py", line N, in run'),
        ("orders.sql:12:5: error", "orders.sql:N:N: error"),
        ("Got 3 results, fail if != 0", "Got N results, fail if != N"),
        ("cast to INT64 in stg_orders_v2 col1", "cast to INT64 in stg_orders_v2 col1"),
        ("/opt/airflow/dags/etl.py", "/opt/airflow/dags/etl.py"),
    ],
)
def test_normalise_message(raw: str, expected: str) -> None:
    assert normalise_message(raw) == expected


def test_normalise_message_replaces_roots_longest_first() -> None:
    text = "/srv/repo/shop/models/a.sql and /srv/repo/x.sql"
    assert normalise_message(text, ["/srv/repo", "/srv/repo/shop"]) == (
        "<repo>/models/a.sql and <repo>/x.sql"
    )


def test_two_failing_data_tests_are_two_causes() -> None:
    from patchit.events.model import FailureSource, UniversalFailureEvent
    from patchit.memory.fingerprint import cause_key

    def test_event(unit: str) -> UniversalFailureEvent:
        return UniversalFailureEvent(
            source=FailureSource.DBT,
            pipeline_id="shop",
            unit_id=unit,
            status="fail",
            error_type="test_failure",
            error_message="Got 1 result, configured to fail if != 0",
        )

    a = test_event("test.shop.not_null_stg_customers_email.d7cf761533")
    b = test_event("test.shop.unique_stg_orders_order_id.81cfe2fe64")
    a_again = test_event("test.shop.not_null_stg_customers_email.0000000000")
    assert cause_key(a) != cause_key(b)
    assert cause_key(a) == cause_key(a_again)
