"""The model tier inside the real loop: the real `anthropic` client against a local server
speaking the Messages API, candidates verified for real by the dbt and Airflow harnesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.loop import Context, heal
from patchit.memory import Memory
from patchit.memory.ledger import Ledger
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events
from tests.evidence.airflow_failures import Zoo
from tests.failed_builds import failed_build

pytestmark = pytest.mark.slow

MODEL = "models/marts/customers.sql"
GOOD = "        sum(amount) as lifetime_value\n"
# a new column outside the aggregate: DuckDB's GROUP BY binder error, no tier-0 fix-it for it
BROKEN = "        sum(amount) as lifetime_value,\n        status as last_status\n"
RIGHT = (
    "        sum(amount) as lifetime_value,\n        arg_max(status, order_date) as last_status\n"
)
WRONG = "        sum(amount) as lifetime_value,\n        status_code as last_status\n"
SECRET = "sk-shop-7f3a9c2e81d4"


def candidates(
    *replacements: str, search: str = BROKEN, path: str = MODEL, tag: str = "add_guard"
) -> dict[str, Any]:
    """A tool_use step answering with one candidate per replacement."""
    return {
        "tool_use": {
            "input": {
                "candidates": [
                    {
                        "edits": [{"file": path, "search": search, "replace": replace}],
                        "strategy_tag": tag,
                        "rationale": "aggregate the new column",
                        "confidence": 0.8,
                    }
                    for replace in replacements
                ]
            }
        },
        "usage": {"input_tokens": 1200, "output_tokens": 150},
    }


def break_model(repo: Path) -> None:
    model = repo / MODEL
    model.write_text(model.read_text().replace(GOOD, BROKEN))
    commit_all(repo, "customers: keep the last order status")


def broken_event(repo: Path, *vars_args: str) -> UniversalFailureEvent:
    break_model(repo)
    code, events = user_dbt_events(repo, ["build", *vars_args])
    assert code == 1
    return next(e for e in events if e.unit_id.endswith(".customers"))


@pytest.fixture
def customers_event(
    shop_repo: Path, built_shop: Path, tmp_path_factory: pytest.TempPathFactory
) -> UniversalFailureEvent:
    """`broken_event(shop_repo)`: `shop_repo` and the event as that failing build leaves them,
    copied from the run's one such build (tests/failed_builds.py)."""
    code, events = failed_build(tmp_path_factory, built_shop, shop_repo, "llm", break_model)
    assert code == 1
    return next(e for e in events if e.unit_id.endswith(".customers"))


def llm_ctx(home: Path, server: ReplayServer, harness: Any, **llm: Any) -> Context:
    config = PatchitConfig.model_validate(
        {"llm": {"enabled": True, "base_url": server.base_url, "max_retries": 0, **llm}}
    )
    return Context(
        home=home,
        memory=Memory.open(home),
        config=config,
        strategies=[LlmStrategy()],
        harnesses=[harness],
    )


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    return "test-key-not-secret"


def heal_with(event: UniversalFailureEvent, ctx: Context) -> Any:
    try:
        return heal(event, ctx)
    finally:
        ctx.close()


def test_model_fix_verified_by_dbt_with_tokens_in_the_report(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    with ReplayServer([candidates(RIGHT)]) as server:
        outcome = heal_with(event, llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300)))
        assert len(server.requests) == 1
        assert server.requests[0].api_key == api_key
    incident = outcome.incident
    assert incident.status == "fixed", Path(incident.report_md or "").read_text()
    assert "arg_max(status, order_date)" in git(shop_repo, "show", str(incident.branch))
    report = json.loads(Path(incident.report_json or "").read_text())
    assert report["llm"]["rounds"] == 1 and report["llm"]["candidates"] == 1
    assert report["llm"]["tokens_in"] == 1200 and report["llm"]["tokens_out"] == 150
    assert report["llm"]["cost_usd"] == pytest.approx((1200 * 3 + 150 * 15) / 1e6)
    assert any("tier 1" in t for t in report["tiers_run"])
    assert git(shop_repo, "status", "--porcelain") == ""


def test_wrong_answer_is_fed_back_and_the_second_round_fixes_it(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    wrong = candidates(WRONG, tag="rename_column")
    with ReplayServer([wrong, candidates(RIGHT)]) as server:
        ctx = llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300), candidates_per_round=1)
        outcome = heal_with(event, ctx)
        second = json.dumps(server.requests[1].body)
    assert outcome.incident.status == "fixed"
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    # `status_code` does not bind: the screen refuses it without a dbt run
    assert [a.outcome for a in attempts] == ["screened_out", "verified"]
    # the second request carries the first diff and what DuckDB's binder said about it
    assert "status_code" in second and "not found" in second.lower()


def test_smallest_passing_diff_wins(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    longer = RIGHT.replace("as last_status", "as last_status  -- the latest order's status")
    with ReplayServer([candidates(longer, RIGHT)]) as server:
        ctx = llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300))
        outcome = heal_with(event, ctx)
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["verified", "verified"]
    assert "the latest order" not in git(shop_repo, "show", str(outcome.incident.branch))


def test_repeated_diff_is_refused_by_memory_without_verifying_again(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    with ReplayServer([candidates(WRONG), candidates(WRONG)]) as server:
        ctx = llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300), candidates_per_round=1)
        outcome = heal_with(event, ctx)
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    # screened out, then the same diff again: refused from memory, neither one run by dbt
    assert [a.outcome for a in attempts] == ["screened_out", "refused"]
    assert attempts[1].reason.startswith("repeated diff")
    assert outcome.incident.status == "failed"


def test_budget_spent_mid_incident_stops_before_the_next_call(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    # the first call's upper bound fits; the tokens it really used leave no room for the next
    expensive = candidates(WRONG, tag="rename_column")
    expensive["usage"] = {"input_tokens": 38_500, "output_tokens": 150}
    with ReplayServer([expensive, candidates(RIGHT)]) as server:
        ctx = llm_ctx(
            _patchit_home, server, DbtHarness(timeout_s=300),
            candidates_per_round=1, max_tokens=1024, max_tokens_per_incident=40_000,
        )  # fmt: skip
        outcome = heal_with(event, ctx)
        assert len(server.requests) == 1
    assert outcome.incident.status == "failed"
    report = Path(outcome.incident.report_md or "").read_text()
    assert "LLM tier stopped: llm.max_tokens_per_incident" in report
    calls = Ledger(ctx.memory).calls_for(outcome.incident.id)
    assert len(calls) == 1 and calls[0].tokens_in == 38_500


def test_malformed_answer_then_a_good_one(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    malformed = {"tool_use": {"input": {"candidates": [{"edits": "not a list"}]}}}
    with ReplayServer([malformed, candidates(RIGHT)]) as server:
        ctx = llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300))
        outcome = heal_with(event, ctx)
    assert outcome.incident.status == "fixed"
    calls = Ledger(ctx.memory).calls_for(outcome.incident.id)
    assert [c.outcome for c in calls] == ["malformed", "ok"]


def test_secrets_in_the_evidence_never_reach_the_server(
    shop_repo: Path, _patchit_home: Path, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    model = shop_repo / MODEL
    model.write_text(
        model.read_text().replace(
            "select\n    c.customer_id,",
            "select\n    '{{ var(\"api_token\") }}' as token_used,\n    c.customer_id,",
            1,
        )
    )
    event = broken_event(shop_repo, "--vars", json.dumps({"api_token": SECRET}))
    with ReplayServer([candidates(RIGHT)]) as server:
        heal_with(event, llm_ctx(_patchit_home, server, DbtHarness(timeout_s=300)))
        sent = "".join(r.raw for r in server.requests)
    assert len(server.requests) == 1
    assert SECRET not in sent
    assert "last_status" in sent  # the evidence itself did reach it


def test_unreachable_api_stops_with_a_report(
    shop_repo: Path, customers_event: UniversalFailureEvent, _patchit_home: Path, api_key: str
) -> None:
    event = customers_event
    with ReplayServer([]) as server:
        url = server.base_url
    # the server is gone: nothing listens on its port any more
    config = PatchitConfig.model_validate(
        {"llm": {"enabled": True, "base_url": url, "max_retries": 0, "timeout_s": 5}}
    )
    ctx = Context(home=_patchit_home, memory=Memory.open(_patchit_home), config=config,
                  strategies=[LlmStrategy()], harnesses=[DbtHarness(timeout_s=300)])  # fmt: skip
    outcome = heal_with(event, ctx)
    assert outcome.incident.status == "failed"
    report = Path(outcome.incident.report_md or "").read_text()
    assert "LLM tier stopped" in report and url.split("//")[1].split("/")[0] in report


def test_no_key_is_exactly_the_offline_default(
    shop_repo: Path,
    customers_event: UniversalFailureEvent,
    _patchit_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    event = customers_event
    ctx = Context(home=_patchit_home, memory=Memory.open(_patchit_home), config=PatchitConfig(),
                  strategies=[LlmStrategy()], harnesses=[DbtHarness(timeout_s=300)])  # fmt: skip
    outcome = heal_with(event, ctx)
    assert outcome.incident.status == "failed"
    report = json.loads(Path(outcome.incident.report_json or "").read_text())
    assert report["llm"] is None
    assert any("tier 1 (LLM): off" in t for t in report["tiers_run"])
    assert Ledger(ctx.memory).calls_for(outcome.incident.id) == []


def test_model_fix_verified_by_airflow(
    zoo: Zoo, tmp_path: Path, _patchit_home: Path, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOO_OUT", str(tmp_path / "out"))
    repo = zoo.copy_repo(tmp_path / "repo")
    event = zoo.event_in("load_order", repo)
    fix = candidates('row["amount"] * 100', search='row["amout"] * 100', path="dags/zoo.py")
    with ReplayServer([fix]) as server:
        ctx = llm_ctx(_patchit_home, server, AirflowHarness(timeout_s=300))
        outcome = heal_with(event, ctx)
    assert outcome.incident.status == "fixed", Path(outcome.incident.report_md or "").read_text()
    assert 'row["amount"]' in git(repo, "show", str(outcome.incident.branch))


def test_second_opinion_classifies_what_the_rules_call_unknown(
    tmp_path: Path, _patchit_home: Path, api_key: str
) -> None:
    from patchit.events.model import FailureSource
    from tests.evidence.airflow_failures import init_repo

    repo = init_repo(tmp_path / "repo")
    # a BashOperator's script failed: no traceback in the repo, no signature for its output
    event = UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id="ledger", unit_id="reconcile",
        error_type="AirflowException",
        error_message="Bash command failed. The command returned a non-zero exit code 3.",
        log_excerpt="reconcile.sh: quarterly totals differ; ledger export is short 3 rows",
        repo_path=str(repo), commit=head_commit(repo),
    )  # fmt: skip
    opinion = {
        "tool_use": {
            "input": {
                "class": "data_issue",
                "reason": "the code compares two totals from an export that is missing rows",
                "evidence_quotes": ["returned a non-zero exit code 3", "not in the evidence"],
            }
        },
        "usage": {"input_tokens": 900, "output_tokens": 60},
    }
    with ReplayServer([opinion]) as server:
        ctx = llm_ctx(_patchit_home, server, AirflowHarness(timeout_s=60))
        outcome = heal_with(event, ctx)
        assert len(server.requests) == 1
    incident = outcome.incident
    assert incident.status == "escalated" and incident.classification == "data_issue"
    report = json.loads(Path(incident.report_json or "").read_text())
    assert report["signature"] == "llm_second_opinion"
    assert "returned a non-zero exit code 3" in report["reason"]
    assert "not in the evidence" not in report["reason"]  # an unchecked quote is dropped
    [call] = Ledger(ctx.memory).calls_for(incident.id)
    assert call.purpose == "classify"
