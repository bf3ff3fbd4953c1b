"""A model the change deleted while another still refs it: its SQL inlined where it is read
(dbt-core#2503's shape), the deletion kept. Real git; the message is dbt 1.11's own."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.config import PolicyConfig
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.gitlog import breaking_diff
from patchit.evidence.intents import change_intents, reverted_intents
from patchit.evidence.model import Evidence
from patchit.patching.base import Edit
from patchit.patching.fixits.deleted_refs import InlineDeletedModelStrategy, inline_ref
from patchit.patching.fixits.restore_deleted import restored_entry
from patchit.policy.intents import intent_review
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
    candidate, restore = InlineDeletedModelStrategy().fix(evidence, [])
    assert restore.tag == "restore_deleted"  # ranked after the forward rewrite
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


# -- a deletion the inliner cannot complete: the file restored, as a revert of the intent ----

SCHEMA = (
    "version: 2\n\nmodels:\n  - name: int_charges\n    description: Successful charges.\n"
    "    columns:\n      - name: id\n        data_tests:\n          - unique\n\n"
    "  - name: customer_revenue\n    columns:\n      - name: customer_id\n"
)
UNIT = (
    "unit_tests:\n  - name: test_revenue_sums_charges\n    model: customer_revenue\n"
    "    given:\n      - input: ref('int_charges')\n        rows:\n"
    "          - {id: 1, customer_id: a, amount: 5}\n"
    "    expect:\n      rows:\n        - {customer_id: a, charged: 5}\n"
)


def _unit_test_repo(tmp_path: Path, *, yaml_deleted: bool = False) -> tuple[Path, str, str]:
    """int_charges deleted with its YAML entry; customer_revenue still refs it and its unit
    test gives `input: ref('int_charges')` (jaffle-shop's order_items shape)."""
    repo, base, _head = _repo(tmp_path)
    git(repo, "reset", "-q", "--hard", base)
    (repo / "models" / "intermediate" / "schema.yml").write_text(SCHEMA)
    (repo / "models" / "marts" / "unit_tests.yml").write_text(UNIT)
    base = commit_all(repo, "schema and unit test")
    (repo / "models" / "intermediate" / "int_charges.sql").unlink()
    if yaml_deleted:
        (repo / "models" / "intermediate" / "schema.yml").unlink()
    else:
        head_part, tail_part = (
            SCHEMA.split("  - name: int_charges")[0],
            SCHEMA.split("  - name: customer_revenue")[1],
        )
        cut = head_part + "  - name: customer_revenue" + tail_part
        (repo / "models" / "intermediate" / "schema.yml").write_text(cut)
    head = commit_all(repo, "drop int_charges")
    return repo, base, head


def _texts(repo: Path, edits: list[Edit]) -> dict[str, tuple[str, str]]:
    texts: dict[str, tuple[str, str]] = {}
    for edit in edits:
        path = repo / edit.path
        before = path.read_text() if path.exists() else ""
        texts[edit.path] = (before, before.replace(edit.search, edit.replace, 1))
    return texts


def test_a_deleted_model_a_unit_test_names_is_restored_with_its_yaml_entry(
    tmp_path: Path,
) -> None:
    repo, base, head = _unit_test_repo(tmp_path)
    evidence = _evidence(repo, base, head)
    evidence.changed_files.append("models/intermediate/schema.yml")
    inline, restore = InlineDeletedModelStrategy().fix(evidence, [])
    assert inline.tag == "inline_deleted" and restore.tag == "restore_deleted"  # ranked last
    texts = _texts(repo, restore.edits)
    assert texts["models/intermediate/int_charges.sql"] == ("", INT)  # byte for byte
    assert texts["models/intermediate/schema.yml"][1] == SCHEMA  # the entry back in its place
    assert "models/marts/unit_tests.yml" in restore.rationale
    assert f"from {base[:12]}" in restore.rationale
    # restoring re-creates what the change deleted: a revert of its intent, held for review
    policy = PolicyConfig()
    reviewed = intent_review(restore, texts, evidence, policy)
    assert reviewed.review.startswith(
        "reverts your change: deleted file models/intermediate/int_charges.sql"
    )
    allowed = intent_review(restore, texts, evidence, policy.model_copy(update={"revert": "allow"}))
    assert allowed.review == ""


def test_a_properties_file_deleted_with_the_model_comes_back_whole(tmp_path: Path) -> None:
    repo, base, head = _unit_test_repo(tmp_path, yaml_deleted=True)
    evidence = _evidence(repo, base, head)
    *_, restore = InlineDeletedModelStrategy().fix(evidence, [])
    assert _texts(repo, restore.edits)["models/intermediate/schema.yml"] == ("", SCHEMA)


def test_an_entry_still_there_is_not_doubled() -> None:
    assert restored_entry(SCHEMA, SCHEMA, "int_charges") is None
    assert restored_entry(SCHEMA, "version: 2\n", "stg_other") is None
