"""sqlglot over compiled SQL: aliases to relations, relations to refs, renamed columns."""

from __future__ import annotations

from patchit.evidence.model import ProjectIndex
from patchit.evidence.sql_parse import (
    dbt_refs,
    mask_jinja,
    relations,
    renamed_columns,
    resolve_alias,
)

WAREHOUSE = {
    "stg_subscriptions": ["subscription_id", "account_id", "plan_id"],
    "stg_invoices": ["invoice_id", "subscription_id", "net_cents"],
    "stg_accounts": ["account_id", "country"],
}

COMPILED = """
with invoices as (select * from "shop"."main"."stg_invoices"),
subscriptions as (select * from "shop"."main"."stg_subscriptions"),
active as (select * exclude (account_id) from subscriptions where plan_id is not null),
renamed as (select subscription_id as sub, plan_id from active)
select invoices.invoice_id, subscriptions.plan_code, a.country, r.sub
from invoices
join subscriptions on invoices.subscription_id = subscriptions.subscription_id
join "shop"."main"."stg_accounts" as a on a.account_id = subscriptions.account_id
join (select r0.sub, r0.plan_id from renamed r0) as r on r.sub = invoices.subscription_id
"""


def test_a_cte_alias_resolves_to_the_relation_it_selects_from() -> None:
    found = resolve_alias(COMPILED, "subscriptions", "plan_code", WAREHOUSE.get)
    assert found is not None
    assert found.tables == ["stg_subscriptions"]
    assert found.columns == ["subscription_id", "account_id", "plan_id"]
    assert found.complete


def test_ctes_resolve_recursively_and_star_exclude_drops_columns() -> None:
    found = resolve_alias(COMPILED + "\njoin active on true", "active", None, WAREHOUSE.get)
    assert found is not None
    assert (found.tables, found.columns) == (["stg_subscriptions"], ["subscription_id", "plan_id"])


def test_a_subquery_exposes_its_own_projections() -> None:
    found = resolve_alias(COMPILED, "r", "plan_code", WAREHOUSE.get)
    assert found is not None
    assert found.columns == ["sub", "plan_id"]


def test_a_joined_base_table_alias_and_case() -> None:
    found = resolve_alias(COMPILED, "A", "countri", WAREHOUSE.get)
    assert found is not None
    assert (found.tables, found.columns) == (["stg_accounts"], ["account_id", "country"])


def test_quoted_identifiers() -> None:
    sql = (
        'with "Subs" as (select * from "db"."main"."stg_subscriptions") '
        'select "Subs"."x" from "Subs"'
    )
    found = resolve_alias(sql, "Subs", "x", WAREHOUSE.get)
    assert found is not None and found.columns == WAREHOUSE["stg_subscriptions"]


def test_the_select_that_uses_the_column_is_chosen_when_an_alias_repeats() -> None:
    sql = (
        "with s as (select * from stg_invoices), "
        "x as (select s.plan_code from stg_subscriptions s) "
        "select s.invoice_id from s join x on true"
    )
    found = resolve_alias(sql, "s", "plan_code", WAREHOUSE.get)
    assert found is not None and found.tables == ["stg_subscriptions"]
    found = resolve_alias(sql, "s", "invoice_id", WAREHOUSE.get)
    assert found is not None and found.tables == ["stg_invoices"]


def test_a_union_exposes_its_first_branch_and_unknown_tables_are_incomplete() -> None:
    sql = "with u as (select a, b from t1 union all select c, d from t2) select u.z from u"
    found = resolve_alias(sql, "u", "z")
    assert found is not None and found.columns == ["a", "b"]
    star = resolve_alias("select t.z from unknown_table t", "t", "z", WAREHOUSE.get)
    assert star is not None and star.columns == [] and not star.complete


def test_a_parse_failure_or_a_missing_alias_gives_none() -> None:
    assert resolve_alias("select from where ((", "s", "x") is None
    assert resolve_alias("select {{ ref('x') }}.a from {{ ref('x') }}", "s", "a") is None
    assert resolve_alias(COMPILED, "nope", "x") is None
    assert relations("select from where ((") is None
    assert renamed_columns("select from where ((") is None


def test_relations_in_order_without_ctes() -> None:
    found = relations(COMPILED)
    assert found is not None
    assert [(r.name, r.schema) for r in found] == [
        ("stg_invoices", "main"),
        ("stg_subscriptions", "main"),
        ("stg_accounts", "main"),
    ]


def test_dbt_refs_maps_relations_to_refs_and_sources() -> None:
    index = ProjectIndex(
        models=["stg_orders", "stg_accounts"],
        seeds=["raw_orders"],
        sources=[("jaffle", "raw_orders"), ("crm", "customers")],
    )
    sql = (
        'select * from "db"."main"."stg_orders" o -- {{ ref(\'commented_out\') }}\n'
        'join "db"."crm"."customers" c on true join "db"."main"."raw_orders" r on true\n'
        'join "db"."jaffle"."raw_orders" j on true'
    )
    assert dbt_refs(sql, index) == (
        ["stg_orders", "raw_orders"],
        [("crm", "customers"), ("jaffle", "raw_orders")],
    )
    # the node itself (an incremental reads {{ this }}) is not its own upstream
    assert dbt_refs(sql, index, own="stg_orders") == (
        ["raw_orders"],
        [("crm", "customers"), ("jaffle", "raw_orders")],
    )
    # a relation that matches nothing (an aliased model) or no parse: the caller falls back
    assert dbt_refs('select * from "db"."main"."orders_v2"', index) is None
    assert dbt_refs("select from where ((", index) is None


def test_renamed_columns_of_a_masked_model() -> None:
    model = (
        "{{ config(materialized='view') }}\n"
        "select\n    subscription_id,\n    plan_code as plan_id,\n"
        "    {{ cents('amount') }} as amount_usd,\n    upper(region) as region\n"
        "from {{ ref('raw_subscriptions') }}\n{# a comment #}\n"
    )
    assert renamed_columns(mask_jinja(model)) == {"plan_code": "plan_id"}
