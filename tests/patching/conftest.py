"""Real dbt failures of the example project, each captured once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patching.scenarios import Broken, break_project

SELF_REF_MODEL = """-- copied from customers.sql, and the ref was renamed along with the file
select customer_id, first_order_date, number_of_orders
from {{ ref('customer_orders') }}
"""

SOURCES_YML = """version: 2

sources:
  - name: raw  # the seeds, read as a source
    schema: main
    tables:
      - name: raw_orders
"""


@pytest.fixture(scope="session")
def staging_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    """Three independent staging models broken at once: two column typos, one macro typo."""
    broken = break_project(
        built_shop,
        tmp_path_factory.mktemp("staging") / "shop",
        {
            "models/staging/stg_customers.sql": ("    first_name,", "    frist_name,"),
            "models/staging/stg_orders.sql": (
                "    status\nfrom {{ ref('raw_orders') }}",
                "    r.stauts\nfrom {{ ref('raw_orders') }} as r",
            ),
            "models/staging/stg_payments.sql": ("cents_to_dollars(", "cents_to_dolars("),
        },
        "run",
        "--select",
        "staging",
    )
    assert broken.returncode == 1, broken.output[-2000:]
    return broken


@pytest.fixture(scope="session")
def orders_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    """A qualified column typo on a view's alias (DuckDB lists no candidates for it)."""
    broken = break_project(
        built_shop,
        tmp_path_factory.mktemp("orders") / "shop",
        {"models/marts/orders.sql": ("    o.status,", "    o.stauts,")},
        "run",
        "--select",
        "orders",
    )
    assert broken.returncode == 1, broken.output[-2000:]
    return broken


def _parse_broken(
    built: Path,
    factory: pytest.TempPathFactory,
    name: str,
    changes: dict[str, tuple[str, str]],
    *dbt_args: str,
) -> Broken:
    """A failure dbt reports before running any node (exit code 2, no run_results)."""
    args = dbt_args or ("parse",)
    broken = break_project(built, factory.mktemp(name) / "shop", changes, *args)
    assert broken.returncode == 2, broken.output[-2000:]
    return broken


@pytest.fixture(scope="session")
def ref_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    change = ("ref('stg_orders')", "ref('stg_order')")
    return _parse_broken(built_shop, tmp_path_factory, "ref", {"models/marts/orders.sql": change})


@pytest.fixture(scope="session")
def source_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    changes = {
        "models/staging/sources.yml": ("", SOURCES_YML),
        "models/staging/stg_orders.sql": ("ref('raw_orders')", "source('raw', 'raw_order')"),
    }
    return _parse_broken(built_shop, tmp_path_factory, "source", changes)


@pytest.fixture(scope="session")
def cycle_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    changes = {"models/marts/customer_orders.sql": ("", SELF_REF_MODEL)}
    # dbt finds cycles when it links the graph, after parsing: `parse` alone passes
    args = ("build", "--select", "customer_orders")
    return _parse_broken(built_shop, tmp_path_factory, "cycle", changes, *args)


@pytest.fixture(scope="session")
def yaml_broken(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    change = (
        "      - name: order_date\n        data_tests:\n          - unique",
        "      - name: order_date\n        data_tests:  # to do: add tests",
    )
    return _parse_broken(built_shop, tmp_path_factory, "yaml", {"models/marts/schema.yml": change})
