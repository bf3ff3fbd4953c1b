"""A model the change deleted while another still refs it: its SQL inlined where it is read
(dbt-core#2503's shape), the deletion kept. Real git; the message is dbt 1.11's own."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.gitlog import breaking_diff
from patchit.evidence.intents import change_intents, reverted_intents
from patchit.evidence.model import Evidence
from patchit.patching.fixits.deleted_refs import InlineDeletedModelStrategy, inline_ref
from tests.conftest import commit_all, git

MESSAGE = (
    "Compilation Error\n  Model 'model.ledger.customer_revenue' (models/marts/customer_revenue"
    ".sql) depends on a node named 'int_charges' which was not found"
)
INT = "-- Successful charges only.\nselect id, customer_id, amount\nfrom raw_charges\n"
REVENUE = (
    "with charges as (\n    select customer_id, sum(amount) as charged\n"
    "    from {{ ref('int_charges') }}\n    group by customer_id\n)\n"
    "select * from charges\n"
)
ALIASED = "select c.customer_id from {{ ref('int_charges') }} as c where c.amount > 0\n"


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "repo"
    (repo / "models" / "intermediate").mkdir(parents=True)
    (repo / "models" / "marts").mkdir()
    (repo / "dbt_project.yml").write_text("name: ledger\nprofile: ledger\n")
    (repo / "models" / "intermediate" / "int_charges.sql").write_text(INT)
    (repo / "models" / "marts" / "customer_revenue.sql").write_text(REVENUE)
    (repo / "models" / "marts" / "top.sql").write_text(ALIASED)
    (repo / "models" / "marts" / "fct.sql").write_text("select * from {{ ref('int_charges') }}\n")
    git(repo, "init", "-q")
    base = commit_all(repo, "good")
    (repo / "models" / "intermediate" / "int_charges.sql").unlink()
    (repo / "models" / "marts" / "fct.sql").write_text("select id from raw_charges\n")
    head = commit_all(repo, "fct reads raw_charges; drop int_charges")
    return repo, base, head


def _evidence(repo: Path, base: str, head: str) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="ledger", unit_id="model.ledger.customer_revenue",
        status="parse_error", error_message=MESSAGE, repo_path=str(repo), commit=head,
    )  # fmt: skip
    return Evidence(
        event=event, repo_root=str(repo), project_dir=".", error=MESSAGE,
        changed_files=["models/intermediate/int_charges.sql", "models/marts/fct.sql"],
        breaking_diff=breaking_diff(repo, base, head), change_base=base, last_good_commit=base,
    )  # fmt: skip


def test_every_model_still_reading_the_deleted_one_gets_its_sql(tmp_path: Path) -> None:
    repo, base, head = _repo(tmp_path)
    evidence = _evidence(repo, base, head)
    [candidate] = InlineDeletedModelStrategy().fix(evidence, [])
    assert sorted(e.path for e in candidate.edits) == [
        "models/marts/customer_revenue.sql",
        "models/marts/top.sql",
    ]
    assert "deleted models/intermediate/int_charges.sql" in candidate.rationale
    # the deletion is kept: no intent of the change is undone by the candidate
    texts = {}
    for edit in candidate.edits:
        before = (repo / edit.path).read_text()
        texts[edit.path] = (before, before.replace(edit.search, edit.replace, 1))
        assert "ref('int_charges')" not in texts[edit.path][1]
        assert (
            "-- int_charges, deleted by the change (models/intermediate/int_charges.sql)"
            in (texts[edit.path][1])
        )
    intents = change_intents(evidence)
    assert any(i.kind == "file_deleted" for i in intents)
    assert reverted_intents(intents, texts) == []


def test_the_inlined_sql_computes_what_the_model_did() -> None:
    con = duckdb.connect()
    con.execute("create table raw_charges as select * from (values (1, 'a', 5), (2, 'a', 7)) "
                "t(id, customer_id, amount)")  # fmt: skip
    sql = inline_ref(REVENUE, "int_charges", INT.strip())
    assert "ref(" not in sql and ") as int_charges" in sql
    assert con.execute(sql).fetchall() == [("a", 12)]
    aliased = inline_ref(ALIASED, "int_charges", INT.strip())
    assert ") as c where" in aliased and "as int_charges" not in aliased
    assert con.execute(aliased).fetchall() == [("a",), ("a",)]


def test_a_ref_to_a_model_the_change_did_not_delete_is_left_to_others(tmp_path: Path) -> None:
    repo, base, head = _repo(tmp_path)
    evidence = _evidence(repo, base, head)
    evidence.error = evidence.event.error_message = MESSAGE.replace("int_charges", "int_charge")
    assert InlineDeletedModelStrategy().fix(evidence, []) == []
