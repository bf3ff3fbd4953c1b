"""The column fix-it with the qualifier resolved by parsing the compiled SQL (no dbt run).

The shape of `benchmarks/corpus/dbt_upstream_rename`: staging renamed plan_code to plan_id,
the mart still selects `subscriptions.plan_code` through a CTE, and DuckDB's message lists no
candidates. The columns come from the upstream relations (the warehouse snapshot).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence, Relation
from patchit.patching.fixits.columns import RenameColumnStrategy
from tests.conftest import commit_all, git
from tests.patching.scenarios import make_evidence

MART = """with invoices as (
    select * from {{ ref('stg_invoices') }}
),

subscriptions as (
    select * from {{ ref('stg_subscriptions') }}
)

select
    invoices.invoice_id,
    subscriptions.plan_code,
    {{ cents('invoices.net_cents') }} as net_usd
from invoices
join subscriptions on invoices.subscription_id = subscriptions.subscription_id
group by invoices.invoice_id, subscriptions.plan_code, net_usd
"""

COMPILED = """with invoices as (
    select * from "shop"."main"."stg_invoices"
),

subscriptions as (
    select * from "shop"."main"."stg_subscriptions"
)

select
    invoices.invoice_id,
    subscriptions.plan_code,
    (invoices.net_cents / 100.0) as net_usd
from invoices
join subscriptions on invoices.subscription_id = subscriptions.subscription_id
group by invoices.invoice_id, subscriptions.plan_code, net_usd
"""

STAGING = """select
    subscription_id,
    plan_code as plan_id,
    cast(started_on as date) as started_on
from {{ ref('raw_subscriptions') }}
"""

MESSAGE = (
    "Runtime Error in model fct_invoices (models/marts/fct_invoices.sql)\n"
    '  Binder Error: Values list "subscriptions" does not have a column named "plan_code"\n'
)

UPSTREAM = [
    Relation(name="stg_invoices", relation="shop.main.stg_invoices",
             columns=["invoice_id", "subscription_id", "net_cents", "tax_cents"]),
    Relation(name="stg_subscriptions", relation="shop.main.stg_subscriptions",
             columns=["subscription_id", "plan_id", "started_on"]),
]  # fmt: skip


def _evidence(root: Path, mart: str = MART, compiled: str | None = COMPILED) -> Evidence:
    (root / "models" / "marts").mkdir(parents=True)
    (root / "models" / "staging").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (root / "models" / "marts" / "fct_invoices.sql").write_text(mart)
    (root / "models" / "staging" / "stg_subscriptions.sql").write_text(STAGING)
    evidence = make_evidence(
        root,
        MESSAGE,
        unit_id="model.shop.fct_invoices",
        unit_path="models/marts/fct_invoices.sql",
        error_type="Runtime Error",
        upstream=UPSTREAM,
    )
    return evidence.model_copy(update={"compiled_code": compiled})


def test_upstream_rename_keeps_the_output_column_name(tmp_path: Path) -> None:
    (candidate,) = RenameColumnStrategy().fix(_evidence(tmp_path), [])
    (edit,) = candidate.edits
    new = MART.replace(edit.search, edit.replace)
    assert "    subscriptions.plan_id as plan_code,\n" in new
    # the GROUP BY item is renamed without an alias; the Jinja argument is left alone
    assert "group by invoices.invoice_id, subscriptions.plan_id, net_usd" in new
    assert "cents('invoices.net_cents')" in new
    assert (
        "stg_subscriptions" in candidate.rationale and "plan_code as plan_id" in candidate.rationale
    )


def test_quoted_column_keeps_its_quotes(tmp_path: Path) -> None:
    mart = MART.replace("    subscriptions.plan_code,", '    "subscriptions"."plan_code",')
    compiled = COMPILED.replace("    subscriptions.plan_code,", '    "subscriptions"."plan_code",')
    (candidate,) = RenameColumnStrategy().fix(_evidence(tmp_path, mart, compiled), [])
    new = mart.replace(candidate.edits[0].search, candidate.edits[0].replace)
    assert '    "subscriptions"."plan_id" as plan_code,\n' in new


def test_no_rename_upstream_and_no_near_column_gives_nothing(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path)
    (tmp_path / "models" / "staging" / "stg_subscriptions.sql").write_text(
        STAGING.replace("plan_code as plan_id", "plan_id")
    )
    assert RenameColumnStrategy().fix(evidence, []) == []


def test_near_column_of_the_resolved_relation_only(tmp_path: Path) -> None:
    """`invoices.net_cent` resolves to stg_invoices: net_cents, not a column of another ref."""
    mart = MART.replace("    invoices.invoice_id,\n", "    invoices.net_cent,\n", 1)
    compiled = COMPILED.replace("    invoices.invoice_id,\n", "    invoices.net_cent,\n", 1)
    evidence = _evidence(tmp_path, mart, compiled)
    evidence = evidence.model_copy(
        update={"error": MESSAGE.replace('"subscriptions"', '"invoices"')}
    )
    evidence.error = evidence.error.replace('"plan_code"', '"net_cent"')
    (candidate,) = RenameColumnStrategy().fix(evidence, [])
    new = mart.replace(candidate.edits[0].search, candidate.edits[0].replace)
    assert "    invoices.net_cents,\n" in new  # a typo fix: the right name, no alias


@pytest.mark.parametrize("compiled", [None, "select from where (("])
def test_unparsed_compiled_sql_falls_back_to_the_raw_refs(
    tmp_path: Path, compiled: str | None
) -> None:
    """No compiled SQL, or SQL that does not parse: the raw file's `ref() }} as alias`."""
    mart = "select s.plan_code, s.subscription_id\nfrom {{ ref('stg_subscriptions') }} as s\n"
    evidence = _evidence(tmp_path, mart, compiled)
    evidence = evidence.model_copy(update={"error": MESSAGE.replace('"subscriptions"', '"s"')})
    (candidate,) = RenameColumnStrategy().fix(evidence, [])
    new = mart.replace(candidate.edits[0].search, candidate.edits[0].replace)
    assert new.startswith("select s.plan_id as plan_code, s.subscription_id\n")


def test_an_expression_renamed_by_the_breaking_change(tmp_path: Path) -> None:
    """`upper(region) as region` became `upper(region) as region_code`: no `old as new` in
    the model today, but its select before and after the breaking change (git) show it."""
    staging = "select\n    subscription_id,\n    upper(region) as {name},\n    plan_id\nfrom raw\n"
    evidence = _evidence(tmp_path)
    path = tmp_path / "models" / "staging" / "stg_subscriptions.sql"
    path.write_text(staging.format(name="region"))
    git(tmp_path, "init", "-q", "-b", "main")
    commit_all(tmp_path, "good")
    path.write_text(staging.format(name="region_code"))
    failing = commit_all(tmp_path, "stg_subscriptions: region_code")
    upstream = [
        r.model_copy(update={"columns": ["subscription_id", "region_code", "plan_id"]})
        if r.name == "stg_subscriptions"
        else r
        for r in UPSTREAM
    ]
    event = evidence.event.model_copy(update={"commit": failing})
    evidence = evidence.model_copy(
        update={
            "event": event,
            "upstream": upstream,
            "error": MESSAGE.replace('"plan_code"', '"region"'),
        }
    )
    mart = MART.replace("subscriptions.plan_code", "subscriptions.region")
    (tmp_path / "models" / "marts" / "fct_invoices.sql").write_text(mart)
    evidence.compiled_code = COMPILED.replace("subscriptions.plan_code", "subscriptions.region")
    (candidate,) = RenameColumnStrategy().fix(evidence, [])
    new = mart.replace(candidate.edits[0].search, candidate.edits[0].replace)
    assert "    subscriptions.region_code as region,\n" in new
    assert "group by invoices.invoice_id, subscriptions.region_code, net_usd" in new
