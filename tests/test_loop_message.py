"""The loop with FollowMessageStrategy and the real dbt harness: the project's money macro is
renamed and its old name left raising dbt_utils-style "has been replaced by"; every call of the
old name is renamed, verified (data check included) and put on a branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.fixits.message import FollowMessageStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events

pytestmark = pytest.mark.slow

MACROS = """{% macro to_dollars(column_name, scale=2) -%}
    round({{ column_name }} / 100.0, {{ scale }})
{%- endmacro %}

{% macro cents_to_dollars(column_name, scale=2) -%}
    {%- do exceptions.raise_compiler_error(
        "Warning: `cents_to_dollars` has been replaced by `to_dollars`. The "
        ~ model.package_name ~ "." ~ model.name ~ " model triggered this warning.") -%}
{%- endmacro %}
"""


def test_a_replaced_macro_lands_renamed_at_its_calls(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    (shop_repo / "macros" / "cents_to_dollars.sql").write_text(MACROS)
    commit_all(shop_repo, "macros: cents_to_dollars is now to_dollars")
    code, [event] = user_dbt_events(shop_repo, ["build"])
    assert code == 2  # dbt renders the stub while parsing
    assert "`cents_to_dollars` has been replaced by `to_dollars`" in event.error_message
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)

    ctx = Context(
        home=_patchit_home,
        memory=Memory.open(_patchit_home),
        config=PatchitConfig(),
        strategies=[FollowMessageStrategy()],
        harnesses=[DbtHarness(timeout_s=300)],
    )
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    incident = outcome.incident
    attempts = ctx.memory.attempts_for(incident.id)
    assert incident.status == "fixed", [a.verification_output[-800:] for a in attempts]
    assert [(a.strategy, a.outcome) for a in attempts] == [("follow_message", "verified")]
    landed = git(shop_repo, "show", f"{incident.branch}:models/staging/stg_payments.sql")
    assert "{{ to_dollars('amount_cents') }} as amount" in landed
    assert git(shop_repo, "show", f"{incident.branch}:macros/cents_to_dollars.sql") == (
        MACROS.strip()
    )  # the stub itself (its definition, its message) is left alone
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before
