"""Completing new code: a new column missing from its GROUP BY, and a bare column the change's
new join made ambiguous. Text fixtures for the SQL; real git for the change each reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.ambiguous import QualifyAmbiguousStrategy, qualify
from patchit.patching.fixits.group_by import GroupByNewColumnStrategy, add_to_group_by
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

MRR = (
    "select\n"
    "    plans.plan_code,\n"
    "    plans.plan_name,\n"
    "    plans.monthly_price_cents,\n"
    "    count(active.subscription_id) as active_subscriptions\n"
    "from {{ ref('stg_plans') }} as plans\n"
    "left join active on active.plan_code = plans.plan_code\n"
    "group by plans.plan_code, plans.plan_name  -- one row a plan\n"
    "order by 1\n"
)
REVENUE = (
    "select\n"
    "    country,\n"
    "    sum(net_usd) as net_revenue_usd\n"
    "from {{ ref('fct_invoices') }}\n"
    "where status = 'paid'\n"
    "group by country\n"
)
JOINED = REVENUE.replace(
    "from {{ ref('fct_invoices') }}\n",
    "from {{ ref('fct_invoices') }} as invoices\n"
    "join {{ ref('stg_accounts') }} as accounts using (account_id)\n",
).replace("    sum(net_usd)", "    max(accounts.account_name) as one_name,\n    sum(net_usd)")


def test_a_new_column_joins_the_group_by_as_written() -> None:
    fixed = add_to_group_by(MRR, "monthly_price_cents", frozenset({4}))
    assert fixed is not None
    text, column = fixed
    assert column == "plans.monthly_price_cents"
    assert "group by plans.plan_code, plans.plan_name, plans.monthly_price_cents  -- one" in text
    # Postgres names it qualified
    assert add_to_group_by(MRR, "plans.monthly_price_cents", frozenset({4})) == fixed


def test_a_positional_group_by_takes_the_new_items_position() -> None:
    # the jaffle shop groups by position: the new item's position is added
    text = MRR.replace("group by plans.plan_code, plans.plan_name", "group by 1, 2")
    fixed = add_to_group_by(text, "monthly_price_cents", frozenset({4}))
    assert fixed is not None
    assert "group by 1, 2, 3  -- one row a plan" in fixed[0]


def test_an_aliased_bare_column_is_grouped_by_its_column() -> None:
    text = MRR.replace("plans.monthly_price_cents,", "plans.monthly_price_cents as price,")
    fixed = add_to_group_by(text, "monthly_price_cents", frozenset({4}))
    assert fixed is not None
    assert "group by plans.plan_code, plans.plan_name, plans.monthly_price_cents  --" in fixed[0]


@pytest.mark.parametrize(
    ("text", "named", "written"),
    [
        (MRR, "monthly_price_cents", frozenset({3})),  # the change did not write that item
        (MRR, "other.monthly_price_cents", frozenset({4})),  # another relation's column
        (MRR.replace("group by plans.plan_code, plans.plan_name", "group by 1, plan_name"),
         "monthly_price_cents", frozenset({4})),  # positions and names mixed: not read
        (MRR.replace("plans.monthly_price_cents", "plans.monthly_price_cents * 12 as y"),
         "monthly_price_cents", frozenset({4})),  # an expression: which column is a choice
        ("select a, b, count(*) from t group by a union all select a, b, count(*) from u "
         "group by a\n", "b", frozenset({1})),  # two selects fit
    ],
)  # fmt: skip
def test_no_group_by_edit_without_confidence(
    text: str, named: str, written: frozenset[int]
) -> None:
    assert add_to_group_by(text, named, written) is None


def test_the_bare_column_is_qualified_with_the_relation_it_came_from() -> None:
    use = "'invoices.country' or 'accounts.country'"
    fixed = qualify(REVENUE, JOINED, "country", use)
    assert fixed is not None
    text, qualifier, count = fixed
    assert (qualifier, count) == ("invoices", 2)
    assert "    invoices.country,\n" in text and "group by invoices.country\n" in text
    assert "where status" in text  # only the ambiguous column
    # DuckDB's own list must name it
    assert qualify(REVENUE, JOINED, "country", "'a.country' or 'b.country'") is None


def test_no_qualifier_without_confidence() -> None:
    two = "select country from a join b on a.id = b.id\n"
    assert qualify(two, two + "join c on c.id = a.id\n", "country") is None  # two before
    assert qualify("select 1 as x\n", JOINED, "country") is None  # no bare use before
    aliased = JOINED.replace("    country,\n", "    upper(name) as country,\n")
    assert qualify(REVENUE, aliased, "country") is None


def _evidence(repo: Path, path: str, message: str) -> Evidence:
    return repo_evidence(repo, path, message, "model.billing.m")


def _changed(tmp_path: Path, before: str, after: str) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "billing")
    path = "models/marts/m.sql"
    (repo / "models/marts").mkdir(parents=True)
    (repo / path).write_text(before)
    commit_all(repo, "good")
    (repo / path).write_text(after)
    commit_all(repo, "the change")
    return repo, path


def test_the_group_by_strategy_reads_the_change(tmp_path: Path) -> None:
    before = MRR.replace("    plans.monthly_price_cents,\n", "")
    repo, path = _changed(tmp_path, before, MRR)
    message = (
        'Binder Error: column "monthly_price_cents" must appear in the GROUP BY clause or must '
        "be part of an aggregate function.\nEither add it to the GROUP BY list"
    )
    (candidate,) = GroupByNewColumnStrategy().fix(_evidence(repo, path, message), [])
    apply_edits(repo, candidate.edits)
    assert "plans.plan_name, plans.monthly_price_cents  --" in (repo / path).read_text()
    postgres = (
        'column "plans.monthly_price_cents" must appear in the GROUP BY clause or be used in an '
        "aggregate function"
    )
    git(repo, "checkout", "--", path)
    assert GroupByNewColumnStrategy().fix(_evidence(repo, path, postgres), [])


def test_the_ambiguous_strategy_reads_the_change(tmp_path: Path) -> None:
    repo, path = _changed(tmp_path, REVENUE, JOINED)
    message = (
        "Binder Error: Ambiguous reference to column name \"country\" (use: 'invoices.country' "
        "or 'accounts.country')"
    )
    (candidate,) = QualifyAmbiguousStrategy().fix(_evidence(repo, path, message), [])
    assert "before the change it came from invoices" in candidate.rationale
    postgres = 'column reference "country" is ambiguous\nLINE 2:     country,'
    assert QualifyAmbiguousStrategy().fix(_evidence(repo, path, postgres), []) == [candidate]


def _group_by_evidence(tmp_path: Path) -> Evidence:
    repo, path = _changed(tmp_path, MRR.replace("    plans.monthly_price_cents,\n", ""), MRR)
    message = 'Binder Error: column "monthly_price_cents" must appear in the GROUP BY clause'
    return _evidence(repo, path, message)


def _ambiguous_evidence(tmp_path: Path) -> Evidence:
    repo, path = _changed(tmp_path, REVENUE, JOINED)
    return _evidence(repo, path, 'column reference "country" is ambiguous')


class TestGroupByContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return GroupByNewColumnStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _group_by_evidence(tmp_path)

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        return _ambiguous_evidence(tmp_path)


class TestQualifyAmbiguousContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return QualifyAmbiguousStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _ambiguous_evidence(tmp_path)

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        return _group_by_evidence(tmp_path)
