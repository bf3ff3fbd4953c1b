"""The loop with FixRefStrategy and the real dbt harness: the breaking change renames a staging
model's file and leaves two refs to its old name behind (a mart and a relationships test). The
fix follows the rename to both, and verifies although the user's failing run never built the
renamed model: the sandbox builds it first. Also on a fresh checkout that has no DuckDB file
yet, where verification builds everything upstream on a fresh warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.fixits.refs import FixRefStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events

pytestmark = pytest.mark.slow

OLD, NEW = "models/staging/stg_customers.sql", "models/staging/stg_crm_customers.sql"


def rename_and_fail(repo: Path) -> UniversalFailureEvent:
    git(repo, "mv", OLD, NEW)
    schema = repo / "models" / "staging" / "schema.yml"
    schema.write_text(
        schema.read_text().replace("- name: stg_customers", "- name: stg_crm_customers")
    )
    commit_all(repo, "staging: name customer models by their source system")
    code, [event] = user_dbt_events(repo, ["build"])
    assert code == 2  # a parse error: no node ran
    assert "depends on a node named 'stg_customers' which was not found" in event.error_message
    return event


def heal_with_fix_ref(event: UniversalFailureEvent, home: Path) -> tuple[str, str]:
    """Heal with the one strategy; (the branch, the report) of a fixed incident."""
    ctx = Context(
        home=home,
        memory=Memory.open(home),
        config=PatchitConfig(),
        strategies=[FixRefStrategy()],
        harnesses=[DbtHarness(timeout_s=300)],
    )
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    assert outcome.incident.status == "fixed", [a.verification_output[-1500:] for a in attempts]
    assert [(a.strategy, a.outcome) for a in attempts] == [("dbt_fix_ref", "verified")]
    return str(outcome.incident.branch), Path(outcome.incident.report_md or "").read_text()


def assert_landed(repo: Path, branch: str) -> None:
    mart = git(repo, "show", f"{branch}:models/marts/customers.sql")
    assert "{{ ref('stg_crm_customers') }} as c" in mart
    tests = git(repo, "show", f"{branch}:models/marts/schema.yml")
    assert "to: ref('stg_crm_customers')" in tests and "stg_customers'" not in tests
    changed = git(repo, "diff", "--name-only", f"{branch}~1", branch).splitlines()
    assert sorted(changed) == ["models/marts/customers.sql", "models/marts/schema.yml"]


def test_a_renamed_model_lands_followed_at_its_refs(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    event = rename_and_fail(shop_repo)
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)
    branch, report = heal_with_fix_ref(event, _patchit_home)
    assert_landed(shop_repo, branch)
    # the warehouse had no stg_crm_customers: the sandbox built it before the mart
    assert "--select customers+ @customers,stg_crm_customers " in report
    assert "renamed models/staging/stg_customers.sql to" in report
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before


def test_a_fresh_checkout_with_no_warehouse_verifies_on_a_fresh_one(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)
    for built in shop_repo.glob("shop.duckdb*"):
        built.unlink()  # a fresh clone: the DuckDB file is ignored by git, never built here
    event = rename_and_fail(shop_repo)
    assert not (shop_repo / "shop.duckdb").exists()  # dbt stopped before opening it
    branch, report = heal_with_fix_ref(event, _patchit_home)
    assert_landed(shop_repo, branch)
    assert "--select customers+ @customers " in report  # all upstream, on a fresh warehouse
    assert not (shop_repo / "shop.duckdb").exists()  # the user's checkout is left as it was
