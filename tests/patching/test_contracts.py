"""A contracted model whose contract fails: the SQL fitted to the declared contract, a new
column added to it, an explicit type change followed into it and held for review. Real git for
the change; the messages are dbt 1.11's (`dbt.exceptions.ContractError`'s table)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.contracts import (
    ContractMismatchStrategy,
    cast_to,
    find_item,
    mismatches,
)
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

SQL_PATH = "models/marts/invoice_collection.sql"
YAML_PATH = "models/marts/schema.yml"
SQL = """select
    date_trunc('month', invoices.created_at) as invoice_month,
    count(*) as invoices,
    {{ cents_to_usd('sum(invoices.amount_paid)') }} as collected_usd

from {{ ref('stg_invoices') }} as invoices

group by 1
"""
PROPS = """version: 2

models:
  - name: invoice_collection
    config:
      contract:
        enforced: true
    columns:
      - name: invoice_month
        data_type: timestamp  # the first day of the month
        data_tests:
          - unique
      - name: invoices
        data_type: bigint
      - name: collected_usd
        data_type: decimal(18, 2)
        description: What was paid.

  - name: payouts
    columns:
      - name: payout_id
"""
HEAD = (
    "Compilation Error in model invoice_collection (models/marts/invoice_collection.sql)\n"
    "  This model has an enforced contract that failed.\n  Please ensure the name, data_type, "
    "and number of columns in your contract match the columns in your model's definition.\n\n"
    "  | column_name      | definition_type | contract_type | mismatch_reason     |\n"
    "  | ---------------- | --------------- | ------------- | ------------------- |\n"
)


def _row(name: str, defined: str, contract: str, reason: str) -> str:
    return f"  | {name} | {defined} | {contract} | {reason} |\n"


def _repo(tmp_path: Path, sql: str, props: str = PROPS) -> Path:
    repo = init_repo(tmp_path / "ledger")
    (repo / "models/marts").mkdir(parents=True)
    (repo / SQL_PATH).write_text(SQL)
    (repo / YAML_PATH).write_text(PROPS)
    commit_all(repo, "good")
    (repo / SQL_PATH).write_text(sql)
    (repo / YAML_PATH).write_text(props)
    commit_all(repo, "invoice_collection: the change")
    return repo


def _evidence(repo: Path, *rows: str) -> Evidence:
    evidence = repo_evidence(repo, SQL_PATH, HEAD + "".join(rows),
                             "model.ledger.invoice_collection")  # fmt: skip
    evidence.unit_name = "invoice_collection"
    evidence.properties = {YAML_PATH: (repo / YAML_PATH).read_text()}
    return evidence


def _fix(repo: Path, *rows: str) -> tuple[str, str, str]:
    (candidate,) = ContractMismatchStrategy().fix(_evidence(repo, *rows), [])
    apply_edits(repo, candidate.edits)
    return (repo / SQL_PATH).read_text(), (repo / YAML_PATH).read_text(), candidate.review


def test_a_column_whose_new_expression_drifted_is_cast_to_the_contract(tmp_path: Path) -> None:
    new = "    sum(invoices.amount_paid) / 100.0 as collected_usd\n"
    sql = SQL.replace("    {{ cents_to_usd('sum(invoices.amount_paid)') }} as collected_usd\n", new)
    repo = _repo(tmp_path, sql)
    fixed, props, review = _fix(
        repo, _row("collected_usd", "DOUBLE", "DECIMAL(18,2)", "data type mismatch")
    )
    cast = "    cast(sum(invoices.amount_paid) / 100.0 as decimal(18, 2)) as collected_usd\n"
    assert fixed == sql.replace(new, cast)  # the type as the YAML writes it
    assert props == PROPS and review == ""


def test_a_new_column_is_added_to_the_contract(tmp_path: Path) -> None:
    payers = "    count(*) as invoices,\n    count(distinct customer_id) as payers,\n"
    sql = SQL.replace("    count(*) as invoices,\n", payers)
    repo = _repo(tmp_path, sql)
    fixed, props, review = _fix(repo, _row("payers", "BIGINT", "", "missing in contract"))
    assert fixed == sql and review == ""
    added = "        description: What was paid.\n      - name: payers\n        data_type: bigint\n"
    assert props == PROPS.replace("        description: What was paid.\n", added)
    doc = YAML(typ="safe").load(props)
    assert [c["name"] for c in doc["models"][0]["columns"]][-1] == "payers"


def test_both_rows_in_one_candidate(tmp_path: Path) -> None:
    sql = SQL.replace("count(*) as invoices,", "count(*) as invoices,\n    1 as one,").replace(
        "{{ cents_to_usd('sum(invoices.amount_paid)') }}", "sum(invoices.amount_paid) / 100.0"
    )
    repo = _repo(tmp_path, sql)
    fixed, props, _ = _fix(
        repo,
        _row("collected_usd", "DOUBLE", "DECIMAL(18,2)", "data type mismatch"),
        _row("one", "INTEGER", "", "missing in contract"),
    )
    assert "cast(sum(invoices.amount_paid) / 100.0 as decimal(18, 2)) as collected_usd" in fixed
    assert "      - name: one\n        data_type: integer\n" in props


def test_a_type_the_change_cast_to_is_followed_into_the_contract_for_review(
    tmp_path: Path,
) -> None:
    sql = SQL.replace(
        "    date_trunc('month', invoices.created_at) as invoice_month,",
        "    cast(date_trunc('month', invoices.created_at) as date) as invoice_month,",
    )
    repo = _repo(tmp_path, sql)
    fixed, props, review = _fix(
        repo, _row("invoice_month", "DATE", "TIMESTAMP", "data type mismatch")
    )
    assert fixed == sql  # the author's cast stays
    assert props == PROPS.replace("data_type: timestamp  #", "data_type: date  #")
    assert "invoice_month timestamp -> date" in review


def test_an_unchanged_model_on_a_new_engine_is_cast(tmp_path: Path) -> None:
    # the model and its contract as they always were; the engine types the expression anew
    # (the public datavault project: least(ncd + 1, 9) INTEGER, the contract bigint)
    props = PROPS.replace("        data_tests:\n          - unique\n", "")
    repo = _repo(tmp_path, SQL, props)
    fixed, _, review = _fix(repo, _row("invoices", "INTEGER", "BIGINT", "data type mismatch"))
    assert "    cast(count(*) as bigint) as invoices,\n" in fixed and review == ""


@pytest.mark.parametrize(
    "rows",
    [
        [_row("collected_usd", "", "DECIMAL(18,2)", "missing in definition")],  # a rename?
        [_row("invoices", "BIGINT", "", "missing in contract")],  # not added by the change
        [_row("nowhere", "DOUBLE", "DECIMAL(18,2)", "data type mismatch")],  # no such line
    ],
)
def test_what_it_cannot_read_gets_no_candidate(tmp_path: Path, rows: list[str]) -> None:
    repo = _repo(tmp_path, SQL.replace("group by 1", "group by 1\nhaving count(*) > 0"))
    assert ContractMismatchStrategy().fix(_evidence(repo, *rows), []) == []


def test_other_errors_get_no_candidate(tmp_path: Path) -> None:
    repo = _repo(tmp_path, SQL.replace("count(*)", "count(*"))
    evidence = _evidence(repo)
    evidence.error = 'Parser Error: syntax error at or near "as"'
    assert ContractMismatchStrategy().fix(evidence, []) == []


def test_reading_the_table_and_the_items() -> None:
    found = mismatches(
        HEAD + _row('"Order Total"', "DOUBLE", "DECIMAL(18,2)", "data type mismatch")
    )
    assert [(m.name, m.defined, m.contract) for m in found] == [
        ("Order Total", "DOUBLE", "DECIMAL(18,2)")
    ]
    assert mismatches(_row("a", "DOUBLE", "INTEGER", "data type mismatch")) == []  # no header
    sql = "with final as (\n  select\n    rc.ncd,\n    x -- as ncd\n  from rc\n)\n"
    sql += "select * from final\n"
    item = find_item(sql, "ncd")
    assert item is not None and (item.expr, item.alias, item.number) == ("rc.ncd", "ncd", 2)
    assert find_item("select\n  f(a as ncd\n", "ncd") is None  # not whole on the line
    assert (
        cast_to("cast(x + 1 as date)") == "date"
        and cast_to("x::decimal(10, 2)") == "decimal(10, 2)"
    )
    assert cast_to("cast(a as int) + cast(b as int)") is None


class TestContractMismatchContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return ContractMismatchStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        sql = SQL.replace("{{ cents_to_usd('sum(invoices.amount_paid)') }}",
                          "sum(invoices.amount_paid) / 100.0")  # fmt: skip
        repo = _repo(tmp_path, sql)
        return _evidence(
            repo, _row("collected_usd", "DOUBLE", "DECIMAL(18,2)", "data type mismatch")
        )

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        evidence = _evidence(_repo(tmp_path, SQL.replace("count(*)", "count(*")))
        evidence.error = 'Parser Error: syntax error at or near "as"'
        return evidence
