"""A docs block or a project var the breaking change renamed is followed to every `doc()` and
`var()` still naming the old one (real git; no dbt: the messages are dbt 1.11's own)."""

from __future__ import annotations

from pathlib import Path

from patchit.patching.apply import apply_edits
from patchit.patching.fixits.follow_names import (
    FollowDocsRenameStrategy,
    FollowVarRenameStrategy,
    follow_call,
)
from patchit.patching.renames import ChangedFile, docs_renames, var_renames
from tests.conftest import commit_all
from tests.patching.test_follow_renames import dbt_evidence, dbt_repo

DOCS = (
    "{% docs orders_status %}\nOne of placed, shipped, completed, returned.\n{% enddocs %}\n\n"
    "{% docs customer_lifetime_value %}\nWhat a customer paid, less refunds.\n{% enddocs %}\n"
)
SCHEMA = (
    "version: 2\nmodels:\n  - name: orders\n    columns:\n      - name: status\n"
    "        description: '{{ doc(\"orders_status\") }}'\n"
    '      - name: note\n        description: "orders_status is a doc, not a column"\n'
)
PROJECT_YML = (
    "name: shop\nprofile: shop\nconfig-version: 2\n"
    'vars:\n  payment_methods: ["credit_card", "coupon"]\n  start_date: "2026-01-01"\n'
)
LOOP = (
    "{%- set methods = var('payment_methods') -%}\nselect\n"
    "{% for m in methods %}  sum({{ m }}_amount) as {{ m }}_total,\n{% endfor %}"
    "  count(*) as n\nfrom {{ ref('orders') }}\n"
)
DOC_MISSING = (
    "Compilation Error\n  Documentation for 'model.shop.orders' depends on doc 'orders_status'  "
    "which was not found"
)
VAR_MISSING = (
    "Compilation Error in model daily (models/marts/daily.sql)\n"
    "  Required var 'payment_methods' not found in config:\n  Vars supplied to daily = {}"
)


def test_a_docs_block_renamed_with_its_text_is_a_rename() -> None:
    after = DOCS.replace("docs orders_status", "docs order_status")
    assert [(r.old, r.new) for r in docs_renames([ChangedFile("models/docs.md", DOCS, after)])] == [
        ("orders_status", "order_status")
    ]
    other = after.replace("One of placed", "Completely different words about nothing at all")
    other = other.replace("shipped, completed, returned.", "")
    assert docs_renames([ChangedFile("models/docs.md", DOCS, other)]) == []


def test_a_var_renamed_with_its_value_is_a_rename_a_changed_value_is_not() -> None:
    after = PROJECT_YML.replace("payment_methods:", "shop_payment_methods:")
    found = var_renames([ChangedFile("dbt_project.yml", PROJECT_YML, after)])
    assert [(r.kind, r.old, r.new) for r in found] == [
        ("var", "payment_methods", "shop_payment_methods")
    ]
    changed = after.replace('"coupon"]', '"coupon", "gift_card"]')
    assert var_renames([ChangedFile("dbt_project.yml", PROJECT_YML, changed)]) == []


def test_follow_call_rewrites_only_calls_inside_jinja() -> None:
    text = "{{ doc('a') }} {{ doc(\"a\") }} doc('a') {{ my.doc('a') }} {{ doc('ab') }}"
    assert follow_call(text, "doc", "a", "b") == (
        "{{ doc('b') }} {{ doc(\"b\") }} doc('a') {{ my.doc('a') }} {{ doc('ab') }}"
    )


def test_a_renamed_docs_block_is_followed_in_every_properties_file(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "models" / "docs.md").write_text(DOCS)
    (repo / "models" / "marts" / "schema.yml").write_text(SCHEMA)
    staging = SCHEMA.replace("name: orders", "name: stg_orders")
    (repo / "models" / "staging" / "schema.yml").write_text(staging)
    commit_all(repo, "docs")
    docs = repo / "models" / "docs.md"
    docs.write_text(DOCS.replace("docs orders_status", "docs order_status"))
    commit_all(repo, "docs: order_status, singular like the column")
    evidence = dbt_evidence(repo, "orders", DOC_MISSING, None)
    (candidate,) = FollowDocsRenameStrategy().fix(evidence, [])
    assert sorted(e.path for e in candidate.edits) == [
        "models/marts/schema.yml", "models/staging/schema.yml"
    ]  # fmt: skip
    assert candidate.follows == {"orders_status": "order_status"}
    apply_edits(repo, candidate.edits)
    marts = (repo / "models" / "marts" / "schema.yml").read_text()
    assert 'doc("order_status")' in marts
    assert "orders_status is a doc, not a column" in marts  # plain text is not a call
    assert "docs order_status" in docs.read_text()  # the rename kept


def test_a_docs_block_deleted_with_no_new_one_gives_no_candidate(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "models" / "docs.md").write_text(DOCS)
    (repo / "models" / "marts" / "schema.yml").write_text(SCHEMA)
    commit_all(repo, "docs")
    (repo / "models" / "docs.md").write_text(DOCS.split("\n\n", 1)[1])
    commit_all(repo, "docs: drop the status table")
    assert FollowDocsRenameStrategy().fix(dbt_evidence(repo, "orders", DOC_MISSING, None), []) == []


def test_a_renamed_var_is_followed_in_the_loop_still_reading_it(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "dbt_project.yml").write_text(PROJECT_YML)
    (repo / "models" / "marts" / "daily.sql").write_text(LOOP)
    (repo / "models" / "marts" / "weekly.sql").write_text(LOOP)
    commit_all(repo, "loops")
    project = repo / "dbt_project.yml"
    project.write_text(PROJECT_YML.replace("payment_methods:", "shop_payment_methods:"))
    weekly = repo / "models" / "marts" / "weekly.sql"
    weekly.write_text(LOOP.replace("var('payment_methods')", "var('shop_payment_methods')"))
    commit_all(repo, "vars: namespace payment_methods")
    evidence = dbt_evidence(repo, "daily", VAR_MISSING, "models/marts/daily.sql")
    (candidate,) = FollowVarRenameStrategy().fix(evidence, [])
    assert [e.path for e in candidate.edits] == ["models/marts/daily.sql"]
    apply_edits(repo, candidate.edits)
    assert "var('shop_payment_methods')" in (repo / "models/marts/daily.sql").read_text()
    assert "shop_payment_methods:" in project.read_text()  # the rename kept


def test_a_var_removed_with_no_rename_gives_no_candidate(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "dbt_project.yml").write_text(PROJECT_YML)
    (repo / "models" / "marts" / "daily.sql").write_text(LOOP)
    commit_all(repo, "loops")
    project = repo / "dbt_project.yml"
    project.write_text(PROJECT_YML.replace('  payment_methods: ["credit_card", "coupon"]\n', ""))
    commit_all(repo, "vars: no payment methods")
    evidence = dbt_evidence(repo, "daily", VAR_MISSING, "models/marts/daily.sql")
    assert FollowVarRenameStrategy().fix(evidence, []) == []


def test_a_renamed_var_read_as_none_is_followed_from_the_failing_model(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "dbt_project.yml").write_text(PROJECT_YML)
    (repo / "models" / "marts" / "daily.sql").write_text(LOOP)
    commit_all(repo, "loops")
    project = repo / "dbt_project.yml"
    project.write_text(PROJECT_YML.replace("payment_methods:", "shop_payment_methods:"))
    commit_all(repo, "vars: namespace payment_methods")
    message = "'NoneType' object is not iterable"
    evidence = dbt_evidence(repo, "daily", message, "models/marts/daily.sql")
    (candidate,) = FollowVarRenameStrategy().fix(evidence, [])
    assert [e.path for e in candidate.edits] == ["models/marts/daily.sql"]
    other = dbt_evidence(repo, "orders", message, "models/marts/orders.sql")
    assert FollowVarRenameStrategy().fix(other, []) == []  # orders reads no renamed var
