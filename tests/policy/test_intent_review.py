"""A candidate that undoes an intent of the breaking change needs review; one that undoes a
slip, or completes the change, does not (real commits in a real git repository, no dbt)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from patchit.config import PolicyConfig
from patchit.patching.base import Edit, PatchCandidate
from patchit.policy.intents import intent_review
from tests.conftest import commit_all
from tests.evidence.test_intents import MART, MONEY, STG, STG_PATH, change, evidence, project

MART_PATH = "models/marts/mrr.sql"
RENAME = {STG_PATH: ("    plan_code,\n", "    plan_code as plan_id,\n")}


def candidate(review: str = "") -> PatchCandidate:
    edits = [Edit(path="x", search="a", replace="b")]  # what is judged is the previewed texts
    return PatchCandidate(strategy="s", tag="t", edits=edits, rationale="r", review=review)


def judged(repo: Path, texts: dict[str, tuple[str, str]], **policy: str) -> str:
    config = PolicyConfig.model_validate(policy)
    return intent_review(candidate(), texts, evidence(repo), config).review


def current(repo: Path, path: str) -> str:
    return (repo / path).read_text()


def test_restoring_a_renamed_column_reverts_the_change(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, RENAME)
    failing = current(repo, STG_PATH)
    assert judged(repo, {STG_PATH: (failing, STG)}) == (
        "reverts your change: renamed column plan_code to plan_id in stg_subscriptions"
    )
    both = failing.replace("plan_code as plan_id,", "plan_code as plan_id,\n    plan_code,")
    assert judged(repo, {STG_PATH: (failing, both)}).startswith("reverts your change")
    assert judged(repo, {STG_PATH: (failing, STG)}, revert="allow") == ""


def test_following_the_rename_forward_is_no_revert(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, RENAME)
    mart = current(repo, MART_PATH)
    forward = mart.replace("active.plan_code,", "active.plan_id as plan_code,").replace(
        "group by active.plan_code", "group by active.plan_id"
    )
    assert judged(repo, {MART_PATH: (mart, forward)}) == ""


def test_restoring_a_dropped_comma_is_no_revert(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, {MART_PATH: ("count(*) as subscriptions,", "count(*) as subscriptions")})
    assert judged(repo, {MART_PATH: (current(repo, MART_PATH), MART)}) == ""


def test_restoring_a_typo_is_no_revert(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, {STG_PATH: ("    plan_code,\n", "    plan_cod,\n")})
    assert judged(repo, {STG_PATH: (current(repo, STG_PATH), STG)}) == ""


def test_dropping_an_added_column_keeps_the_strategy_s_own_review(tmp_path: Path) -> None:
    repo = project(tmp_path)
    added = "count(*) as subscriptions,\n    sum(refunds) as refunds,"
    change(repo, {MART_PATH: ("count(*) as subscriptions,", added)})
    own = "it drops code the breaking change added"
    reviewed = intent_review(candidate(own), {MART_PATH: (current(repo, MART_PATH), MART)},
                             evidence(repo), PolicyConfig())  # fmt: skip
    assert reviewed.review == f"reverts your change: added column refunds to mrr; {own}"


def test_re_creating_a_deleted_file_or_a_renamed_macro(tmp_path: Path) -> None:
    repo = project(tmp_path)
    (repo / MART_PATH).unlink()
    (repo / "macros/money.sql").write_text(MONEY.replace("cents_to_dollars", "dollars_of"))
    commit_all(repo, "drop mrr, rename the macro")
    assert judged(repo, {MART_PATH: ("", MART)}) == "reverts your change: deleted file " + (
        "models/marts/mrr.sql"
    )
    money = current(repo, "macros/money.sql")
    stub = money + "{% macro cents_to_dollars(c) %}{{ dollars_of(c) }}{% endmacro %}\n"
    assert judged(repo, {"macros/money.sql": (money, stub)}) == (
        "reverts your change: renamed macro cents_to_dollars to dollars_of"
    )
    # the callers following the new name: forward
    mart_text = MART.replace("cents_to_dollars", "dollars_of")
    assert judged(repo, {"models/marts/other.sql": ("", mart_text)}) == ""


def test_a_bad_policy_value_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="revert"):
        PolicyConfig.model_validate({"revert": "sometimes"})
