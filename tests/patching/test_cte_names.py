"""Completing new code: a CTE name the change mistyped where it reads it. Text fixtures for
which name is read; real git for the change it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.cte_names import FixCteNameStrategy, read_cte
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

GOOD = (
    "with payments as (\n"
    "    select * from {{ ref('stg_payments') }}\n"
    "),\n"
    "customer_payments as (\n"
    "    select\n"
    "        customer_id,\n"
    "        sum(amount) as total_amount\n"
    "    from payments\n"
    "    group by customer_id\n"
    ")\n"
    "select * from customer_payments\n"
)
# the change adds a column and mistypes the CTE it reads on the line it rewrote
BROKEN = GOOD.replace(
    "        sum(amount) as total_amount\n    from payments\n",
    "        sum(amount) as total_amount,\n        count(*) as number_of_payments\n"
    "    from payment\n",
)


def test_the_mistyped_name_reads_its_near_cte_and_the_new_column_stays() -> None:
    fixed = read_cte(BROKEN, "payment", frozenset({7, 8, 9}))
    assert fixed is not None
    text, new, _ctes = fixed
    assert new == "payments"
    assert text == BROKEN.replace("    from payment\n", "    from payments\n")
    assert "count(*) as number_of_payments" in text


@pytest.mark.parametrize(
    ("text", "name", "written"),
    [
        (BROKEN, "payment", frozenset({1, 2})),  # the change did not write the line
        (BROKEN, "payments", frozenset({9})),  # a CTE of the file: not a misspelt one
        (BROKEN, "invoices", frozenset({9})),  # no CTE near it
        ("select * from payment\n", "payment", frozenset({1})),  # no CTE at all
        # two CTEs equally near: which one is meant is not known
        ("with ab as (select 1), ac as (select 2)\nselect * from a\n", "a", frozenset({2})),
        # qualified: a relation of a schema, not a CTE
        (GOOD.replace("from payments", "from raw.payment"), "payment", frozenset({8})),
    ],
)
def test_no_rewrite_where_the_cte_is_not_known(
    text: str, name: str, written: frozenset[int]
) -> None:
    assert read_cte(text, name, written) is None


def _evidence(repo: Path, path: str, message: str) -> Evidence:
    return repo_evidence(repo, path, message, "model.shop.customers")


def _cte_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "shop")
    path = "models/customers.sql"
    (repo / "models").mkdir(parents=True)
    (repo / path).write_text(GOOD)
    commit_all(repo, "good")
    (repo / path).write_text(BROKEN)
    commit_all(repo, "customers: number of payments")
    return repo, path


# DuckDB names a real table of the catalog; following it would read the seed, not the CTE
DUCKDB = (
    "Catalog Error: Table with name payment does not exist!\n"
    'Did you mean "raw_payments"?\nLINE 9:     from payment'
)


def test_the_strategy_reads_the_change_and_names_no_catalog_table(tmp_path: Path) -> None:
    repo, path = _cte_repo(tmp_path)
    (candidate,) = FixCteNameStrategy().fix(_evidence(repo, path, DUCKDB), [])
    assert candidate.review == ""  # `payment` -> `payments`: a slip
    apply_edits(repo, candidate.edits)
    assert (repo / path).read_text() == BROKEN.replace("from payment\n", "from payments\n")
    git(repo, "checkout", "--", path)
    postgres = 'relation "payment" does not exist\nLINE 9:     from payment'
    assert FixCteNameStrategy().fix(_evidence(repo, path, postgres), [])


class TestFixCteNameContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FixCteNameStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_cte_repo(tmp_path), DUCKDB)

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_cte_repo(tmp_path), 'Referenced column "x" not found in FROM clause!')
