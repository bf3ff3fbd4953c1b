"""Columns a Jinja loop generates, renamed by the change, followed into the consumers' loops
(real git; no dbt: the message is DuckDB's own)."""

from __future__ import annotations

from pathlib import Path

from patchit.patching.apply import apply_edits
from patchit.patching.fixits.template_renames import (
    FollowTemplateRenameStrategy,
    follow_template,
    template_renames,
)
from tests.conftest import commit_all
from tests.patching.test_follow_renames import dbt_evidence, dbt_repo

PIVOT = (
    "select order_id,\n{% for m in var('methods') %}\n"
    "    sum(case when method = '{{ m }}' then amount else 0 end) as {{ m }}_amount,\n"
    "{% endfor %}\n    sum(amount) as total\nfrom {{ ref('stg_orders') }}\ngroup by 1\n"
)
DAILY = (
    "select\n{% for method in var('methods') %}\n"
    "    sum({{ method }}_amount) as {{ method }}_rev,\n"
    "{% endfor %}\n    count(*) as n\nfrom {{ ref('pivot') }}\n"
)
MESSAGE = (
    "Runtime Error in model daily (models/marts/daily.sql)\n  Binder Error: Referenced column "
    '"credit_card_amount" not found in FROM clause!\n  Candidate bindings: "credit_card_paid"'
)


def test_an_alias_glued_to_jinja_renamed_is_read() -> None:
    after = PIVOT.replace("{{ m }}_amount", "{{ m }}_paid")
    assert template_renames(PIVOT, after) == [("_amount", "_paid")]
    both = after.replace("as total", "as total, {{ m }}_amount as x")
    assert template_renames(PIVOT, both) == []  # the old template still named: no rename


def test_follow_template_keeps_the_consumers_own_outputs() -> None:
    assert follow_template("sum({{ x }}_amount) as {{ x }}_amount,", "_amount", "_paid") == (
        "sum({{ x }}_paid) as {{ x }}_amount,"
    )
    assert follow_template("select\n{% for x in y %} {{ x }}_amount,\n{% endfor %} 1 from t",
                           "_amount", "_paid") == (
        "select\n{% for x in y %} {{ x }}_paid as {{ x }}_amount,\n{% endfor %} 1 from t"
    )  # fmt: skip


def test_a_loop_rename_is_followed_in_the_consumers_loop(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "models" / "marts" / "pivot.sql").write_text(PIVOT)
    (repo / "models" / "marts" / "daily.sql").write_text(DAILY)
    commit_all(repo, "pivot")
    pivot = repo / "models" / "marts" / "pivot.sql"
    pivot.write_text(PIVOT.replace("{{ m }}_amount", "{{ m }}_paid"))
    commit_all(repo, "pivot: <method>_paid")
    evidence = dbt_evidence(repo, "daily", MESSAGE, "models/marts/daily.sql")
    (candidate,) = FollowTemplateRenameStrategy().fix(evidence, [])
    apply_edits(repo, candidate.edits)
    daily = (repo / "models" / "marts" / "daily.sql").read_text()
    assert "sum({{ method }}_paid) as {{ method }}_rev" in daily
    assert "as {{ m }}_paid" in pivot.read_text()  # the rename kept


def test_a_consumer_reading_another_relation_too_is_not_guessed(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    (repo / "models" / "marts" / "pivot.sql").write_text(PIVOT)
    joined = DAILY.replace("from {{ ref('pivot') }}", "from {{ ref('pivot') }}, {{ ref('fx') }}")
    (repo / "models" / "marts" / "daily.sql").write_text(joined)
    commit_all(repo, "pivot")
    pivot = repo / "models" / "marts" / "pivot.sql"
    pivot.write_text(PIVOT.replace("{{ m }}_amount", "{{ m }}_paid"))
    commit_all(repo, "pivot: <method>_paid")
    evidence = dbt_evidence(repo, "daily", MESSAGE, "models/marts/daily.sql")
    assert FollowTemplateRenameStrategy().fix(evidence, []) == []
