"""Following a CTE the change renamed to the references it left (found trying
dbt-labs/jaffle_shop_duckdb: `customer_payments` renamed `payments_by_customer` in its
definition and join, `customer_payments.total_amount` left; a partial revert undid the rename
and the incident ended `failed`). Text fixtures for the rewrite; real git for the change."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.cte_rename import FollowCteRenameStrategy, follow_cte
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

GOOD = (
    "with customer_payments as (\n"
    "    select customer_id, sum(amount) as total_amount\n"
    "    from {{ ref('stg_payments') }}\n"
    "    group by customer_id\n"
    "),\n"
    "final as (\n"
    "    select\n"
    "        c.customer_id,\n"
    "        customer_payments.total_amount, -- customer_payments.total_amount\n"
    "        'customer_payments' as source,\n"
    "        {{ money('customer_payments.total_amount') }} as dollars\n"
    "    from {{ ref('stg_customers') }} as c\n"
    "    left join customer_payments on c.customer_id = customer_payments.customer_id\n"
    ")\n"
    "select * from final\n"
)
# the change renames the CTE and its join, and leaves the select item on the old name
BROKEN = GOOD.replace("with customer_payments as (", "with payments_by_customer as (").replace(
    "    left join customer_payments on c.customer_id = customer_payments.customer_id\n",
    "    left join payments_by_customer on c.customer_id = payments_by_customer.customer_id\n",
)


def test_the_references_left_read_the_new_name_and_nothing_else_changes() -> None:
    fixed = follow_cte(BROKEN, "customer_payments", "payments_by_customer")
    assert fixed == BROKEN.replace(
        "        customer_payments.total_amount, --",
        "        payments_by_customer.total_amount, --",
    )  # the comment, the string and the Jinja keep the old name
    # a bare table reference too (DuckDB: "Table with name ... does not exist")
    bare = BROKEN.replace("select * from final", "select * from customer_payments")
    fixed = follow_cte(bare, "customer_payments", "payments_by_customer")
    assert fixed is not None and fixed.endswith("select * from payments_by_customer\n")


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        (GOOD, "customer_payments", "payments_by_customer"),  # the new name is no CTE
        # the old name is still a CTE of the file
        (BROKEN.replace("final as (", "customer_payments as (select 1),\nfinal as ("),
         "customer_payments", "payments_by_customer"),
        # ... or an alias: `customer_payments.x` reads it, not the renamed CTE
        (BROKEN.replace("as c\n", "as customer_payments\n"), "customer_payments",
         "payments_by_customer"),
        (BROKEN, "invoices", "payments_by_customer"),  # nothing reads the old name
        ("select from (", "a", "b"),  # does not parse
    ],
)  # fmt: skip
def test_no_rewrite_where_the_rename_is_not_known(text: str, old: str, new: str) -> None:
    assert follow_cte(text, old, new) is None


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "shop")
    path = "models/customers.sql"
    (repo / "models").mkdir(parents=True)
    (repo / path).write_text(GOOD)
    commit_all(repo, "good")
    (repo / path).write_text(BROKEN)
    commit_all(repo, "customers: name the payments CTE by its grain")
    return repo, path


DUCKDB = 'Binder Error: Referenced table "customer_payments" not found!\nCandidate tables: "c"'


def _evidence(repo: Path, path: str, message: str) -> Evidence:
    return repo_evidence(repo, path, message, "model.shop.customers")


@pytest.mark.parametrize(
    "message",
    [
        DUCKDB,
        'missing FROM-clause entry for table "customer_payments"',  # Postgres
        "SQL compilation error: error line 9 at position 8\n"
        "invalid identifier 'CUSTOMER_PAYMENTS.TOTAL_AMOUNT'",  # Snowflake
    ],
)
def test_the_strategy_follows_the_rename_the_change_made(tmp_path: Path, message: str) -> None:
    repo, path = _repo(tmp_path)
    (candidate,) = FollowCteRenameStrategy().fix(_evidence(repo, path, message), [])
    assert candidate.review == "" and "the rename kept" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert (repo / path).read_text() == follow_cte(
        BROKEN, "customer_payments", "payments_by_customer"
    )


def test_a_name_the_change_did_not_rename_gets_nothing(tmp_path: Path) -> None:
    repo, path = _repo(tmp_path)
    other = 'Binder Error: Referenced table "invoices" not found!'
    assert FollowCteRenameStrategy().fix(_evidence(repo, path, other), []) == []


class TestFollowCteRenameContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FollowCteRenameStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_repo(tmp_path), DUCKDB)

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_repo(tmp_path), 'Referenced column "x" not found in FROM clause!')
