"""Completing new code: the comma a new or rewritten select item left out. Text fixtures for
where the comma goes; real git for the change it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.missing_comma import MissingCommaStrategy, add_comma
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

MART = (
    "-- Paid net revenue per country and month.\n"
    "select\n"
    "    country,\n"
    "    sum(net_usd) as net_revenue_usd,\n"
    "    count(*) as paid_invoices  -- all of them\n"
    "    sum(tax_usd) as tax_usd\n"
    "from {{ ref('fct_invoices') }}\n"
    "where status = 'paid'\n"
    "group by country\n"
)


def test_the_comma_goes_after_the_code_of_the_line_above_the_new_item() -> None:
    fixed, line = add_comma(MART, "sum", frozenset({6})) or ("", 0)
    assert line == 5
    assert "    count(*) as paid_invoices,  -- all of them\n    sum(tax_usd) as tax_usd\n" in fixed


def test_where_the_parser_names_no_token_the_one_place_that_parses_takes_the_comma() -> None:
    # the Snowflake emulator's parser says `Expecting ). Line 2, Col: 7.`, no token
    fixed, line = add_comma(MART, None, frozenset({6})) or ("", 0)
    assert line == 5 and "count(*) as paid_invoices,  -- all of them\n" in fixed


@pytest.mark.parametrize(
    "error",
    [
        "001003 (42000): SQL compilation error:\nsyntax error line 6 at position 4 "
        "unexpected 'sum'.",
        "001003 (42000): Expecting ). Line 6, Col: 7.\n  create or replace transient table",
    ],
    ids=["snowflake", "emulator"],
)
def test_snowflakes_syntax_errors_are_followed(error: str) -> None:
    from patchit.patching.fixits.missing_comma import _NEAR

    found = _NEAR.search(error)
    assert found is not None
    assert (found.group("token") or found.group("sf_token")) == (
        "sum" if "unexpected" in error else None
    )


def test_a_rewritten_line_that_dropped_its_comma() -> None:
    text = "select\n    round(sum(net_usd), 2) as net\n    count(*) as n\nfrom t\n"
    assert add_comma(text, "count", frozenset({2})) == (
        "select\n    round(sum(net_usd), 2) as net,\n    count(*) as n\nfrom t\n",
        2,
    )


def test_a_new_item_written_in_jinja() -> None:
    text = "select\n    a\n    {{ cents('b') }} as b\nfrom t\n"
    fixed = add_comma(text, "round", frozenset({3}))
    assert fixed is not None and fixed[0].startswith("select\n    a,\n")


@pytest.mark.parametrize(
    ("item", "token"),
    [
        ("order_date >= '2018-03-01' as is_recent", ">="),
        ("order_date as order_day", "as"),
        ("amount * 100 as amount_cents", "*"),
    ],
)
def test_a_new_item_whose_first_word_reads_as_an_alias_of_the_item_above(
    item: str, token: str
) -> None:
    # `status order_date >= ...`: `order_date` aliases `status`, the parser stops one later
    text = f"select\n    order_id,\n    status\n    {item}\nfrom source\n"
    fixed = add_comma(text, token, frozenset({4}))
    assert fixed == (text.replace("    status\n", "    status,\n"), 3)


@pytest.mark.parametrize(
    ("text", "token", "written"),
    [
        (MART, "sum", frozenset({9})),  # neither line was written by the change
        # the second token only when the first is a word: `(b` does not alias the item above
        ("select\n    a\n    (b) as c\nfrom t\n", "b", frozenset({3})),
        (MART, "count", frozenset({6})),  # the parser stopped elsewhere
        ("select\n    a\n    from t\n", "from", frozenset({2})),  # a clause, not an item
        ("select\n    a +\n    b\nfrom t\n", "b", frozenset({3})),  # the line goes on
        # two places fit: which one is meant is not known
        ("select\n    a\n    b\n    c\n    b\nfrom t\n", "b", frozenset({2, 3, 4, 5})),
        # the comma alone does not make it parse
        ("select\n    a\n    b c d (\nfrom t\n", "b", frozenset({3})),
    ],
)
def test_no_comma_where_it_does_not_fit_with_confidence(
    text: str, token: str, written: frozenset[int]
) -> None:
    assert add_comma(text, token, written) is None


def _evidence(repo: Path, path: str, message: str) -> Evidence:
    return repo_evidence(repo, path, message, "model.billing.rev")


def test_the_strategy_reads_the_change_and_keeps_the_new_column(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "billing")
    path = "models/marts/rev.sql"
    (repo / "models/marts").mkdir(parents=True)
    (repo / path).write_text(MART.replace(",  -- all", "  -- all").replace(
        "    sum(tax_usd) as tax_usd\n", ""))  # fmt: skip
    commit_all(repo, "good")
    (repo / path).write_text(MART)
    commit_all(repo, "rev: tax per country")
    message = 'Parser Error: syntax error at or near "sum"\nLINE 16:     sum(tax_usd) as tax_usd'
    (candidate,) = MissingCommaStrategy().fix(_evidence(repo, path, message), [])
    assert "added the comma, the item kept" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert (
        "paid_invoices,  -- all of them\n    sum(tax_usd) as tax_usd\n" in (repo / path).read_text()
    )
    postgres = 'syntax error at or near "sum"\nLINE 6:     sum(tax_usd) as tax_usd'
    git(repo, "checkout", "--", path)
    assert MissingCommaStrategy().fix(_evidence(repo, path, postgres), [])
    # an unchanged file: the change did not write the line, nothing is proposed
    other = _evidence(repo, path, 'Binder Error: Referenced column "x" not found')
    assert MissingCommaStrategy().fix(other, []) == []


def _comma_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "billing")
    path = "models/marts/rev.sql"
    (repo / "models/marts").mkdir(parents=True)
    (repo / path).write_text(MART.replace("    sum(tax_usd) as tax_usd\n", ""))
    commit_all(repo, "good")
    (repo / path).write_text(MART)
    commit_all(repo, "rev: tax per country")
    return repo, path


class TestMissingCommaContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return MissingCommaStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_comma_repo(tmp_path), 'Parser Error: syntax error at or near "sum"')

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(*_comma_repo(tmp_path), 'syntax error at or near "where"')
