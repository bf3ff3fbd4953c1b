"""The light render of a dbt model: ref, source and config, and nothing else."""

from __future__ import annotations

import pytest

from patchit.screen.render import Resolved, Unsure, render_model

RELATIONS = {
    ("ref", ("orders",)): Resolved("model.shop.orders", '"shop"."main"."orders"'),
    ("ref", ("shop", "orders")): Resolved("model.shop.orders", '"shop"."main"."orders"'),
    ("source", ("app", "users")): Resolved("source.shop.app.users", '"shop"."app"."users"'),
}


def resolve(kind: str, args: tuple[str, ...]) -> Resolved:
    try:
        return RELATIONS[(kind, args)]
    except KeyError:
        raise Unsure(f"{kind}{args} unknown") from None


def test_refs_and_sources_become_relation_names_and_config_nothing() -> None:
    text = (
        "{{ config(materialized='table', tags=['daily'], meta={'owner': 'dana'}) }}\n"
        "select o.*, u.email\n"
        "from {{ ref('orders') }} as o\n"
        "join {{- source('app', 'users') }} as u using (user_id) {# a comment #}\n"
        "left join {{ ref('shop', 'orders') }} as again using (order_id)\n"
    )
    rendered = render_model(text, resolve)
    assert rendered.sql == (
        "\nselect o.*, u.email\n"
        'from "shop"."main"."orders" as o\n'
        'join"shop"."app"."users" as u using (user_id) \n'
        'left join "shop"."main"."orders" as again using (order_id)'
    )
    assert rendered.parents == ["model.shop.orders", "source.shop.app.users", "model.shop.orders"]
    assert not rendered.moves_relation


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("select {{ cents_to_dollars('amount') }} from t", "calls cents_to_dollars()"),
        ("select * from {{ dbt_utils.star(ref('orders')) }}", "dbt_utils.star()"),
        ("{% if is_incremental() %}where x{% endif %}", "if block"),
        ("{% set n = 1 %}select {{ n }}", "assign block"),
        ("select * from {{ this }}", "(this)"),
        ("select '{{ var(\"day\") }}'", "calls var()"),
        ("select * from {{ ref('orders') | lower }}", "filter"),
        ("select * from {{ ref(model_name) }}", "where the screen needs a literal"),
        ("select * from {{ ref('orders', v=2) }}", "keyword arguments"),
        ("select * from {{ ref('orders' }}", "cannot parse"),
        ("{{ config('table') }}select 1", "positional"),
        ("select * from {{ ref('missing') }}", "unknown"),
        ("{% do run_query('drop table x') %}", "cannot parse"),
    ],
)
def test_anything_else_is_unsure(text: str, why: str) -> None:
    with pytest.raises(Unsure, match=why.replace("(", r"\(").replace(")", r"\)")):
        render_model(text, resolve)


def test_a_candidates_jinja_is_never_executed() -> None:
    # template injection: walking the parse tree evaluates nothing
    for text in (
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ config(materialized=''.__class__) }}",
        "{{ ref('orders'.__class__.__name__) }}",
    ):
        with pytest.raises(Unsure):
            render_model(text, resolve)


@pytest.mark.parametrize(
    "config",
    ["alias='orders_v2'", "schema='marts'", "enabled=false", "materialized='ephemeral'"],
)
def test_a_config_that_moves_the_relation_is_noted(config: str) -> None:
    rendered = render_model(f"{{{{ config({config}) }}}}select 1 as x", resolve)
    assert rendered.sql == "select 1 as x"
    assert rendered.moves_relation
