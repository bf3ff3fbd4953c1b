"""A near name on a line the breaking change wrote is a guess: each near-name fix-it still
proposes it, with a `review` naming the alternatives, unless it reads as a typo and is the only
near name that does. Names the change did not write keep the fix-its' own rule.

Real git histories and real Python tracebacks; the dbt failures are the binder's messages on
a mart whose compiled SQL is parsed (no dbt run: the real run is in test_loop_near_names).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.gitlog import breaking_diff
from patchit.evidence.model import Evidence, Relation
from patchit.patching.base import PatchCandidate
from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.fixits.macros import FixMacroStrategy
from patchit.patching.fixits.message import FollowMessageStrategy
from patchit.patching.fixits.near_names import change_wrote
from patchit.patching.fixits.python_calls import FixCallStrategy
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from patchit.patching.fixits.python_names import FixNameStrategy
from patchit.patching.fixits.refs import FixRefStrategy
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.patching.scenarios import make_evidence

MART = """with accounts as (
    select * from {{{{ ref('stg_accounts') }}}}
)

select
    accounts.account_id,
{lines}from accounts
"""
COMPILED = """with accounts as (
    select * from "shop"."main"."stg_accounts"
)

select
    accounts.account_id,
{lines}from accounts
"""
PATH = "models/marts/dim_accounts.sql"


def _mart(repo: Path, lines: str) -> None:
    (repo / PATH).write_text(MART.format(lines=lines))


def _column_evidence(
    tmp_path: Path, good: str, broken: str, col: str, columns: list[str]
) -> Evidence:
    """dim_accounts selects `good` lines at the good commit and `broken` ones at the failing
    commit; DuckDB cannot bind accounts.<col>; stg_accounts has `columns`."""
    repo = init_repo(tmp_path / "repo")
    (repo / "models" / "marts").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    _mart(repo, good)
    commit_all(repo, "good")
    _mart(repo, broken)
    failing = commit_all(repo, "the change")
    message = (
        "Runtime Error in model dim_accounts (models/marts/dim_accounts.sql)\n"
        f'  Binder Error: Values list "accounts" does not have a column named "{col}"\n'
    )
    upstream = [Relation(name="stg_accounts", relation="shop.main.stg_accounts", columns=columns)]
    evidence = make_evidence(
        repo, message, unit_id="model.shop.dim_accounts", unit_path=PATH,
        error_type="Runtime Error", upstream=upstream,
    )  # fmt: skip
    return evidence.model_copy(
        update={
            "event": evidence.event.model_copy(update={"commit": failing}),
            "compiled_code": COMPILED.format(lines=broken),
            "breaking_diff": breaking_diff(repo, None, failing),
        }
    )


def _only(candidates: list[PatchCandidate]) -> PatchCandidate:
    assert len(candidates) == 1, candidates
    return candidates[0]


ADDRESS_COLUMNS = ["account_id", "country", "ship_address_key"]
SHIP = "    accounts.ship_address_key,\n"
BILL = "    accounts.bill_address_key,\n"


def test_a_different_word_the_change_wrote_is_proposed_for_review(tmp_path: Path) -> None:
    evidence = _column_evidence(tmp_path, SHIP, SHIP + BILL, "bill_address_key", ADDRESS_COLUMNS)
    candidate = _only(RenameColumnStrategy().fix(evidence, []))
    assert candidate.edits[0].replace == "    accounts.ship_address_key,\n"
    assert candidate.review.startswith(
        "`bill_address_key` is not a typo of `ship_address_key`: a different word "
        "(`bill` -> `ship`: opposites or siblings), on a line this change wrote "
        f"({PATH}:8); alternatives: a column `bill_address_key` the change may have meant"
    )


def test_the_same_name_in_existing_code_keeps_todays_fix(tmp_path: Path) -> None:
    # the line was there at the good commit: the change did not write the name
    evidence = _column_evidence(
        tmp_path, SHIP + BILL, SHIP + BILL + "    accounts.country,\n", "bill_address_key",
        ADDRESS_COLUMNS,
    )  # fmt: skip
    candidate = _only(RenameColumnStrategy().fix(evidence, []))
    assert candidate.edits[0].replace == "    accounts.ship_address_key,\n"
    assert candidate.review == ""


def test_a_typo_the_change_wrote_is_taken(tmp_path: Path) -> None:
    columns = ["account_id", "customer_id", "country"]
    evidence = _column_evidence(tmp_path, "", "    accounts.custmer_id,\n", "custmer_id", columns)
    candidate = _only(RenameColumnStrategy().fix(evidence, []))
    assert candidate.edits[0].replace == "    accounts.customer_id,\n"
    assert candidate.review == ""


def test_two_near_typos_the_change_wrote_are_for_review(tmp_path: Path) -> None:
    columns = ["account_id", "customer_id", "customers_id"]
    evidence = _column_evidence(tmp_path, "", "    accounts.custmer_id,\n", "custmer_id", columns)
    candidate = _only(RenameColumnStrategy().fix(evidence, []))
    assert candidate.review.startswith(
        "`custmer_id` may be a typo of `customer_id`, `customers_id`: more than one near "
        "column fits a name this change wrote"
    )
    assert "alternatives: `customers_id`, or a column `custmer_id`" in candidate.review


def test_a_line_only_moved_by_the_change_keeps_its_old_names(tmp_path: Path) -> None:
    evidence = _column_evidence(
        tmp_path, SHIP + BILL, SHIP + "    accounts.bill_address_key as bill_key,\n",
        "bill_address_key", ADDRESS_COLUMNS,
    )  # fmt: skip
    assert change_wrote(evidence, PATH, "bill_address_key") is None
    assert change_wrote(evidence, PATH, "bill_key") == 8
    assert change_wrote(evidence, PATH, "ship_address_key") is None
    assert change_wrote(evidence, "models/other.sql", "bill_key") is None


# -- Python: keys, names, attributes, keywords, and Python's own suggestion -----------------


def _python_evidence(tmp_path: Path, source: str, existing: bool = False) -> Evidence:
    """`source` failing, as the breaking change wrote it; `existing`: it was committed
    before, and the change only added a comment at the end."""
    repo = init_repo(tmp_path / "repo")
    if existing:
        (repo / "jobs").mkdir()
        (repo / "jobs/job.py").write_text(source)
        commit_all(repo, "the job")
        source += "# reviewed\n"
    return gather_airflow_evidence(script_failure(repo, "jobs/job.py", source, "job"), repo)


KEY_JOB = textwrap.dedent(
    """\
    def label(row):
        return row["bill_address_city"]


    print(label({"ship_address_city": "Paris", "account_id": 1}))
    """
)


def test_a_key_the_change_wrote_is_for_review(tmp_path: Path) -> None:
    candidate = _only(RenameKeyStrategy().fix(_python_evidence(tmp_path, KEY_JOB), []))
    assert '"ship_address_city"' in candidate.edits[0].replace
    assert candidate.review.startswith(
        "`bill_address_city` is not a typo of `ship_address_city`: a different word "
        "(`bill` -> `ship`: opposites or siblings), on a line this change wrote (jobs/job.py:2)"
    )


def test_a_key_in_existing_code_keeps_todays_fix(tmp_path: Path) -> None:
    evidence = _python_evidence(tmp_path, KEY_JOB, existing=True)
    assert _only(RenameKeyStrategy().fix(evidence, [])).review == ""


def test_a_typo_key_the_change_wrote_is_taken(tmp_path: Path) -> None:
    source = KEY_JOB.replace("bill_address_city", "ship_adress_city")
    assert _only(RenameKeyStrategy().fix(_python_evidence(tmp_path, source), [])).review == ""


NAME_JOB = textwrap.dedent(
    """\
    def spread(rows):
        max_total = max(rows)
        return max_total - min_total


    print(spread([1, 2]))
    """
)


def test_a_name_the_change_wrote_is_for_review_by_both_fixits(tmp_path: Path) -> None:
    evidence = _python_evidence(tmp_path, NAME_JOB)
    assert evidence.event.error_message.endswith("Did you mean: 'max_total'?")
    for strategy in (FixNameStrategy(), FollowMessageStrategy()):
        candidate = _only(strategy.fix(evidence, []))
        assert "max_total - max_total" in candidate.edits[0].replace
        assert candidate.review.startswith(
            "`min_total` is not a typo of `max_total`: a different word (`min` -> `max`"
        ), strategy.name


ATTR_JOB = textwrap.dedent(
    """\
    class Invoice:
        def __init__(self, cents):
            self.invoice_gross_amount_cents = cents


    print(Invoice(100).invoice_net_amount_cents)
    """
)


def test_an_attribute_the_change_wrote_is_for_review(tmp_path: Path) -> None:
    evidence = _python_evidence(tmp_path, ATTR_JOB)
    candidate = _only(FixNameStrategy().fix(evidence, []))
    assert ".invoice_gross_amount_cents)" in candidate.edits[0].replace
    assert "`net` -> `gross`" in candidate.review
    assert "jobs/job.py:6" in candidate.review


def test_a_typo_attribute_the_change_wrote_is_taken(tmp_path: Path) -> None:
    source = ATTR_JOB.replace(
        "Invoice(100).invoice_net_amount_cents", "Invoice(100).invoice_gross_amout_cents"
    )
    evidence = _python_evidence(tmp_path, source)
    assert _only(FixNameStrategy().fix(evidence, [])).review == ""
    assert _only(FollowMessageStrategy().fix(evidence, [])).review == ""


CALL_JOB = textwrap.dedent(
    """\
    def write_rows(rows, max_batch=100):
        return len(rows[:max_batch])


    print(write_rows([1, 2], min_batch=1))
    """
)


def test_a_keyword_the_change_wrote_is_for_review(tmp_path: Path) -> None:
    candidate = _only(FixCallStrategy().fix(_python_evidence(tmp_path, CALL_JOB), []))
    assert "max_batch=1" in candidate.edits[0].replace
    assert candidate.review.startswith(
        "`min_batch` is not a typo of `max_batch`: a different word (`min` -> `max`"
    )
    assert "a keyword `min_batch` the change may have meant to add" in candidate.review


def test_a_keyword_in_existing_code_keeps_todays_fix(tmp_path: Path) -> None:
    evidence = _python_evidence(tmp_path, CALL_JOB, existing=True)
    assert _only(FixCallStrategy().fix(evidence, [])).review == ""


# -- dbt refs and macros --------------------------------------------------------------------


def _dbt_evidence(tmp_path: Path, files: dict[str, str], model: str, message: str) -> Evidence:
    """A project whose last commit wrote `model`; `files` were there before."""
    repo = init_repo(tmp_path / "repo")
    (repo / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "good")
    (repo / "models/marts").mkdir(parents=True, exist_ok=True)
    (repo / "models/marts/report.sql").write_text(model)
    failing = commit_all(repo, "report")
    evidence = make_evidence(
        repo, message, unit_id="model.shop.report", unit_path="models/marts/report.sql",
        error_type="Compilation Error",
    )  # fmt: skip
    return evidence.model_copy(
        update={
            "event": evidence.event.model_copy(update={"commit": failing}),
            "breaking_diff": breaking_diff(repo, None, failing),
        }
    )


def test_a_ref_the_change_wrote_to_another_version_is_for_review(tmp_path: Path) -> None:
    message = (
        "Compilation Error\n  Model 'model.shop.report' (models/marts/report.sql) depends on a "
        "node named 'fct_orders_v2' which was not found"
    )
    files = {"models/marts/fct_orders_v1.sql": "select 1 as id\n"}
    model = "select * from {{ ref('fct_orders_v2') }}\n"
    evidence = _dbt_evidence(tmp_path, files, model, message)
    candidate = _only(FixRefStrategy().fix(evidence, []))
    assert "ref('fct_orders_v1')" in candidate.edits[0].replace
    assert candidate.review.startswith(
        "`fct_orders_v2` is not a typo of `fct_orders_v1`: a different number (`2` -> `1`)"
    )
    typo = model.replace("fct_orders_v2", "fct_ordrs_v1")
    evidence = _dbt_evidence(
        tmp_path / "typo", files, typo, message.replace("orders_v2", "ordrs_v1")
    )
    assert _only(FixRefStrategy().fix(evidence, [])).review == ""


def test_a_macro_the_change_wrote_is_for_review(tmp_path: Path) -> None:
    message = (
        "Compilation Error in model report (models/marts/report.sql)\n  'amount_min_usd' is "
        "undefined. This can happen when calling a macro that does not exist. Check for typos "
        'and/or install package dependencies with "dbt deps".'
    )
    files = {"macros/money.sql": "{% macro amount_max_usd(x) %}max({{ x }}){% endmacro %}\n"}
    model = "select {{ amount_min_usd('cents') }} as low from {{ ref('orders') }}\n"
    candidate = _only(FixMacroStrategy().fix(_dbt_evidence(tmp_path, files, model, message), []))
    assert "amount_max_usd('cents')" in candidate.edits[0].replace
    assert "`min` -> `max`" in candidate.review and "a macro `amount_min_usd`" in candidate.review
