"""The fan-out fix-it: a join the breaking change added multiplies the model's rows and a
`unique` test fails; the join is made once per key, the change's new columns listed. The
rewritten SQL is run on DuckDB (in-process) to show the grain is restored and nothing else
changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.fanout import FanoutJoinStrategy
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import make_evidence

MART = "models/marts/fct_invoices.sql"
BEFORE = """\
with invoices as (
    select * from {{ ref('stg_invoices') }}
),

subscriptions as (
    select * from {{ ref('stg_subscriptions') }}
)

select
    invoices.invoice_id,
    subscriptions.plan_code,
    subscriptions.account_id
from invoices
join subscriptions on invoices.subscription_id = subscriptions.subscription_id
"""
AFTER = BEFORE.replace(
    "    subscriptions.plan_code,\n",
    "    subscriptions.plan_code,\n    account_plans.plan_code as account_plan_code,\n",
).replace(
    "= subscriptions.subscription_id\n",
    "= subscriptions.subscription_id\nleft join subscriptions as account_plans on "
    "account_plans.account_id = subscriptions.account_id\n",
)
FIXED_JOIN = """\
left join (
    select account_id, string_agg(distinct cast(plan_code as varchar), ', ' order by \
cast(plan_code as varchar)) as plan_code
    from subscriptions
    group by account_id
) as account_plans on account_plans.account_id = subscriptions.account_id
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def _repo(tmp_path: Path, before: str, after: str, adapter: str = "duckdb") -> tuple[Path, str]:
    """A repo whose last commit turns the mart `before` into `after`; and that diff."""
    repo = tmp_path / "repo"
    (repo / "models" / "marts").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: billing\nprofile: billing\nversion: '1'\n")
    (repo / "profiles.yml").write_text(
        f"billing:\n  target: dev\n  outputs:\n    dev:\n      type: {adapter}\n"
        "      path: billing.duckdb\n      account: x\n      database: d\n      schema: s\n"
    )
    (repo / MART).write_text(before)
    (repo / "models" / "marts" / "schema.yml").write_text(
        "models:\n  - name: fct_invoices\n    columns:\n      - name: invoice_id\n"
        "        data_tests: [unique]\n"
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "good")
    (repo / MART).write_text(after)
    _git(repo, "commit", "-q", "-am", "show every plan of the account")
    return repo, _git(repo, "diff", "HEAD~1", "HEAD")


def _evidence(
    tmp_path: Path, after: str = AFTER, kind: str = "unique", before: str = BEFORE,
    adapter: str = "duckdb",
) -> Evidence:  # fmt: skip
    repo, diff = _repo(tmp_path, before, after, adapter)
    evidence = make_evidence(
        repo, "Got 3 results, configured to fail if != 0",
        unit_id="test.billing.unique_fct_invoices_invoice_id.d277b7dc5b",
        unit_path="models/marts/schema.yml", error_type="test_failure", status="fail",
    )  # fmt: skip
    evidence.test_kind, evidence.tested_model_path = kind, MART
    evidence.tested_model, evidence.unit_name = "fct_invoices", "unique_fct_invoices_invoice_id"
    evidence.breaking_diff = diff
    evidence.change_base = _git(repo, "rev-parse", "HEAD~1").strip()
    return evidence


@pytest.fixture
def strategy() -> Strategy:
    return FanoutJoinStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return _evidence(tmp_path)


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    return _evidence(tmp_path, kind="not_null")


class TestFanoutJoinContract(StrategyContract):
    pass


def _run(sql: str) -> list[tuple[object, ...]]:
    """The mart's SQL on DuckDB, with its refs as tables of invoices and subscriptions."""
    con = duckdb.connect()
    try:
        con.execute(
            "create table stg_invoices as select * from (values (1, 10), (2, 11), (3, 12)) "
            "t(invoice_id, subscription_id);"
            "create table stg_subscriptions as select * from (values (10, 'basic', 100), "
            "(11, 'pro', 100), (12, 'pro', 200)) t(subscription_id, plan_code, account_id)"
        )
        sql = sql.replace("{{ ref('stg_invoices') }}", "stg_invoices")
        sql = sql.replace("{{ ref('stg_subscriptions') }}", "stg_subscriptions")
        return con.execute(f"select * from ({sql}) order by all").fetchall()
    finally:
        con.close()


def test_the_added_join_is_made_once_per_key_and_the_grain_restored(evidence: Evidence) -> None:
    [candidate] = FanoutJoinStrategy().fix(evidence, [])
    assert candidate.strategy == "dbt_fanout_join" and not candidate.review
    assert "subscriptions as account_plans by account_id" in candidate.rationale
    root = Path(evidence.repo_root)
    apply_edits(root, candidate.edits)
    fixed = (root / MART).read_text()
    assert fixed == AFTER.replace(
        "left join subscriptions as account_plans on account_plans.account_id = "
        "subscriptions.account_id\n",
        FIXED_JOIN,
    )
    # the broken SQL fans out: account 100's two invoices appear twice each
    assert len(_run(AFTER)) == 5
    rows = _run(fixed)
    assert [r[0] for r in rows] == [1, 2, 3]  # one row per invoice again
    # (invoice_id, plan_code, account_plan_code, account_id): the old columns as before
    assert [(r[0], r[1], r[3]) for r in rows] == _run(BEFORE)
    assert [r[2] for r in rows] == ["basic, pro", "basic, pro", "pro"]  # every plan, listed


@pytest.mark.parametrize(
    ("after", "why"),
    [
        # the alias is used in a filter: listing its values would change which rows pass
        (AFTER + "where account_plans.plan_code <> 'x'\n", "a filter"),
        # a condition that is not a plain equality of columns
        (AFTER.replace("account_plans.account_id = subscriptions.account_id",
                       "account_plans.account_id > subscriptions.account_id"), "not equality"),
        # a right join keeps the joined side's rows: not one per key of the model
        (AFTER.replace("left join subscriptions", "right join subscriptions"), "right join"),
        # two added joins: either could be the fan-out
        (AFTER + "left join subscriptions as more_plans on more_plans.account_id = "
         "subscriptions.account_id\n", "two joins"),
        # the alias is used in an expression, not as a select-list item
        (AFTER.replace("    account_plans.plan_code as account_plan_code,\n",
                       "    upper(account_plans.plan_code) as account_plan_code,\n"), "expr"),
    ],
)  # fmt: skip
def test_nothing_is_proposed_where_the_meaning_could_change(
    tmp_path: Path, after: str, why: str
) -> None:
    assert FanoutJoinStrategy().fix(_evidence(tmp_path, after), []) == [], why


def test_a_join_the_change_did_not_add_is_left_alone(tmp_path: Path) -> None:
    """The join was there before: the change only started selecting from it (existing code
    the user relies on), so it is not this fix-it's to rewrite."""
    before = AFTER.replace("    account_plans.plan_code as account_plan_code,\n", "")
    assert FanoutJoinStrategy().fix(_evidence(tmp_path, before=before), []) == []


CHANGED_JOIN = BEFORE.replace(
    "    subscriptions.plan_code,\n", "    subscriptions.plan_code,\n    ap.plan_code\n"
).replace(
    "= subscriptions.subscription_id\n",
    "= subscriptions.subscription_id\nleft join subscriptions as ap on ap.subscription_id = "
    "subscriptions.subscription_id\n",
)


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        # the change rewrote a join that existed (its key): existing columns would be lists
        (CHANGED_JOIN, CHANGED_JOIN.replace(
            "    ap.plan_code\n", "    ap.plan_code,\n    ap.account_id as acct\n").replace(
            "ap.subscription_id = subscriptions.subscription_id",
            "ap.account_id = subscriptions.account_id"), "existing alias"),
        # a quoted column in a filter the scan must not miss
        (BEFORE, AFTER + 'where account_plans."plan_code" <> \'basic\'\n', "quoted column"),
        # a comment or Jinja naming the alias: not provably a select item
        (BEFORE, AFTER + "-- account_plans: one per plan\n", "comment"),
        # `alias.*` takes columns nobody listed
        (BEFORE, AFTER.replace("account_plans.plan_code as account_plan_code,",
                               "account_plans.*,"), "star"),
        # two listed columns would be sorted apart and no longer pair up
        (BEFORE, AFTER.replace("account_plans.plan_code as account_plan_code,\n",
                               "account_plans.plan_code as account_plan_code,\n"
                               "    account_plans.subscription_id as account_sub,\n"), "two"),
        # a form feed: Python and git would number the lines differently
        ("\x0c\n" + BEFORE, "\x0c\n" + AFTER, "form feed"),
        # the select item sits inside a call of the select list
        (BEFORE, AFTER.replace("    account_plans.plan_code as account_plan_code,\n",
                               "    coalesce(\n    account_plans.plan_code\n    , 'x') as p,\n"),
         "in a call"),
        # a commented-out join is no join
        (BEFORE, AFTER.replace("left join subscriptions as account_plans",
                               "-- left join subscriptions as account_plans"), "commented"),
        # an unqualified column could be the joined relation's: it would become a list
        (BEFORE, AFTER + "where plan_code <> 'x'\n", "unqualified"),
        # the item re-sources an output name the model had: existing output would change
        (BEFORE, AFTER.replace("    subscriptions.plan_code,\n    account_plans.plan_code as "
                               "account_plan_code,\n", "    account_plans.plan_code,\n"),
         "existing name"),
        # one line of a longer expression is not a select item
        (BEFORE, AFTER.replace("    account_plans.plan_code as account_plan_code,\n",
                               "    case when\n    account_plans.plan_code\n    = 'pro' then 1 "
                               "end as pro,\n"), "case fragment"),
        # the new column read by its name later in the file
        (BEFORE, AFTER + "where account_plan_code is not null\n", "read by name"),
        # a quoted identifier: its apostrophe would blank real SQL from the scan
        (BEFORE, AFTER.replace("    invoices.invoice_id,\n",
                               "    invoices.invoice_id as \"invoice's id\",\n"), "quoted"),
        # the join's type on the line before, or its condition continued on the next
        (BEFORE, AFTER.replace("left join subscriptions as account_plans",
                               "right\njoin subscriptions as account_plans"), "type above"),
        (BEFORE, AFTER + "    or account_plans.account_id is null\n", "condition below"),
        # Jinja where the rows are chosen
        (BEFORE, AFTER + "where {{ var('filter', 'true') }}\n", "jinja filter"),
    ],
)  # fmt: skip
def test_nothing_is_proposed_where_existing_output_could_change(
    tmp_path: Path, before: str, after: str, why: str
) -> None:
    assert FanoutJoinStrategy().fix(_evidence(tmp_path, after, before=before), []) == [], why


def test_crlf_files_keep_their_line_ends_and_other_warehouses_get_nothing(
    tmp_path: Path,
) -> None:
    crlf = _evidence(tmp_path / "crlf", AFTER.replace("\n", "\r\n"),
                     before=BEFORE.replace("\n", "\r\n"))  # fmt: skip
    [candidate] = FanoutJoinStrategy().fix(crlf, [])
    root = Path(crlf.repo_root)
    apply_edits(root, candidate.edits)
    assert (root / MART).read_bytes().count(b"\n") == (root / MART).read_bytes().count(b"\r\n")
    assert b"left join (\r\n    select account_id" in (root / MART).read_bytes()
    bigquery = _evidence(tmp_path / "bq", adapter="bigquery")
    assert FanoutJoinStrategy().fix(bigquery, []) == []


def test_on_snowflake_the_list_is_snowflakes_listagg(tmp_path: Path) -> None:
    snowflake = _evidence(tmp_path / "sf", adapter="snowflake")
    [candidate] = FanoutJoinStrategy().fix(snowflake, [])
    root = Path(snowflake.repo_root)
    apply_edits(root, candidate.edits)
    listed = (
        "    select account_id, listagg(distinct cast(plan_code as varchar), ', ') within group "
        "(order by cast(plan_code as varchar)) as plan_code\n"
    )
    assert listed in (root / MART).read_text()


def test_nothing_is_proposed_when_another_model_reads_the_new_column(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path)
    other = Path(evidence.repo_root) / "models" / "marts" / "plans_report.sql"
    other.write_text("select account_plan_code from {{ ref('fct_invoices') }}\n")
    assert FanoutJoinStrategy().fix(evidence, []) == []
