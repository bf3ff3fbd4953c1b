"""What reaches the model: order of the context, packing to the budget, earlier attempts,
and never a secret (asserted on the bodies the replay server received)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.config import LlmConfig
from patchit.events.model import DbtInvocation
from patchit.evidence.model import Evidence
from patchit.evidence.redact import MASK
from patchit.memory import Memory
from patchit.patching.base import PriorAttempt
from patchit.patching.llm.context import Piece, Section, pack
from patchit.patching.llm.prompt import propose_prompt
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.llm.conftest import ERROR, answer, cand, llm_config, make_event, make_evidence, user_text

ENV_SECRET = "env-secret-9f8e7d6c5b4a"
VARS_SECRET = "vars-secret-1a2b3c4d5e"
ERROR_SECRET = "pw-in-error-77aa88bb"
FILE_SECRET = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"


def sent_prompt(evidence: Evidence, memory: Memory, incident_id: str, **cfg: object) -> str:
    history = [
        PriorAttempt(
            diff_hash="h1",
            tag="rename_column",
            outcome="failed",
            diff="-    c.nme,\n+    c.full_name,\n",
            reason="still failing: model.shop.customers",
            output="$ dbt build --select customers+\nBinder Error: column full_name_marker",
        )
    ]
    with ReplayServer([answer(cand("c.nme", "c.name"))]) as server:
        strategy = LlmStrategy(llm_config(server, **cfg), memory, incident_id)
        strategy.propose_round(evidence, history, 1)
    [body] = server.bodies
    return str(body["system"]) + "\n" + user_text(body)


def test_breaking_diff_first_then_unit_neighbours_history_attempts(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    text = sent_prompt(evidence, memory, incident_id)
    user = text.split("\n", text.count("\n"))  # the whole text, for readable asserts below
    assert user
    marks = [
        "## The change that broke it (HEAD~1 -> failing commit)",
        "-    c.name,\n+    c.nme,",  # the breaking diff itself
        "## The failing unit",
        'Referenced column "nme" not found',
        "## Its neighbours",
        "stg_customers: customer_id, name, signup_date",
        "## History",
        "abc1234 2026-01-05 Dana Engineer",
        "## Earlier attempts on this failure (do not repeat them)",
    ]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)
    body_start = text.index("## ")
    assert text[body_start:].startswith("## The change that broke it")


def test_earlier_attempts_carry_diff_output_and_reason(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    text = sent_prompt(evidence, memory, incident_id)
    assert "+    c.full_name," in text
    assert "why it failed: still failing: model.shop.customers" in text
    assert "Binder Error: column full_name_marker" in text
    assert "Do not propose any of\n  them again" in text


def test_small_budget_drops_low_priority_sections_and_says_so(
    repo: Path, memory: Memory, incident_id: str
) -> None:
    big = {f"models/neighbour_{i}.sql": "select 1 as id -- padding\n" * 120 for i in range(3)}
    evidence = make_evidence(repo, related_code=big)
    text = sent_prompt(evidence, memory, incident_id, context_tokens=2_000)
    assert "-    c.name,\n+    c.nme," in text and 'Referenced column "nme"' in text
    assert "## Left out to fit the context budget of 2000 tokens" in text
    assert "- cut short: Its neighbours: related code models/neighbour_1.sql" in text
    assert "- dropped: Its neighbours: related code models/neighbour_2.sql" in text
    assert "- dropped: History: recent commits of the files" in text
    assert "- dropped: Earlier attempts on this failure (do not repeat them): attempt 1" in text
    assert "## History" not in text and "abc1234" not in text


def test_a_huge_piece_takes_at_most_half_the_budget() -> None:
    sections = [
        Section("breaking_change", "Change", [Piece("diff", "+x\n" * 20_000)]),
        Section("failing_unit", "Unit", [Piece("failure", ERROR)]),
    ]
    packed = pack(sections, 2_000, [])
    diff, failure = (s.pieces[0] for s in packed.sections)
    assert diff.cut and not failure.cut and failure.text == ERROR
    assert packed.cut == ["Change: diff"] and packed.dropped == []
    assert packed.tokens <= 2_000


def test_no_secret_reaches_the_server(
    repo: Path, memory: Memory, incident_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_API_TOKEN", ENV_SECRET)
    raw_vars = json.dumps({"api_token": VARS_SECRET})
    dbt = DbtInvocation(
        command="build",
        args=["build", "--vars", f'{{"api_token": "{MASK}"}}'],
        project_dir=str(repo),
        cwd=str(repo),
        vars=f'{{"api_token": "{MASK}"}}',
    ).with_raw_vars(raw_vars)
    event = make_event(
        repo, dbt=dbt.model_dump(), error_message=f"{ERROR}\npassword={ERROR_SECRET}"
    )
    event.dbt.with_raw_vars(raw_vars)  # type: ignore[union-attr]
    evidence = make_evidence(
        repo,
        event=event,
        error=f"{ERROR}\nconnection failed: password={ERROR_SECRET}",
        compiled_code=f"select '{VARS_SECRET}' as token_used, '{ENV_SECRET}' as k",
        properties={"models/schema.yml": f"api_key: {FILE_SECRET}\n"},
        breaking_diff=f"+    '{{{{ var(\"api_token\") }}}}' -- was {VARS_SECRET}\n",
    )
    with ReplayServer([answer(cand("c.nme", "c.name"))]) as server:
        LlmStrategy(llm_config(server), memory, incident_id).propose_round(evidence, [], 1)
    raw = "".join(r.raw for r in server.requests)
    for secret in (ENV_SECRET, VARS_SECRET, ERROR_SECRET, FILE_SECRET):
        assert secret not in raw
    assert MASK in raw and "token_used" in raw  # the evidence itself was sent


def test_prompt_is_rendered_from_the_package_templates(evidence: Evidence) -> None:
    prompt = propose_prompt(evidence, [], LlmConfig(candidates_per_round=3))
    assert "up to 3" in prompt.system and "rename_column, fix_ref" in prompt.system
    assert "Do not propose any of" not in prompt.system  # no earlier attempts: no such rule
    assert prompt.user.rstrip().endswith("with the `propose_patches` tool.")
    assert prompt.packed.dropped == [] and prompt.packed.cut == []
