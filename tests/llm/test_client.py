"""The real anthropic client against the replay server: answers, usage, retries, failures."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from patchit.config import LlmConfig
from patchit.patching.llm.answers import PROPOSE_TOOL, propose_tool
from patchit.patching.llm.client import (
    LlmClient,
    LlmRequest,
    LlmUnavailable,
    llm_enabled,
    price,
)
from patchit.patching.llm.server import ReplayServer, load_script
from tests.llm.conftest import API_KEY, llm_config

REQUEST = LlmRequest("be brief", "the evidence", propose_tool(2), 512)


def ask(server: ReplayServer, **cfg: Any) -> Any:
    client = LlmClient(llm_config(server, **cfg))
    try:
        return client.create(REQUEST)
    finally:
        client.close()


def test_tool_use_answer_usage_and_the_request_sent() -> None:
    step = {
        "tool_use": {"input": {"candidates": []}},
        "usage": {"input_tokens": 1234, "output_tokens": 56},
    }
    with ReplayServer([step]) as server:
        reply = ask(server, model="claude-test-model")
    assert reply.tool_input == {"candidates": []}
    assert (reply.usage.tokens_in, reply.usage.tokens_out) == (1234, 56)
    assert reply.usage.cost_usd == pytest.approx((1234 * 3.0 + 56 * 15.0) / 1e6)
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.api_key == API_KEY  # x-api-key, or Authorization: Bearer in SDK 2.x
    body = request.body
    assert body["model"] == "claude-test-model" and body["max_tokens"] == 512
    assert body["tool_choice"] == {"type": "tool", "name": PROPOSE_TOOL}
    assert body["tools"][0]["input_schema"]["required"] == ["candidates"]
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "the evidence"}]


def test_a_text_answer_has_no_tool_input() -> None:
    with ReplayServer([{"text": "I think the column was renamed."}]) as server:
        reply = ask(server)
    assert reply.tool_input is None and "renamed" in reply.text


def test_429_then_success_is_retried_by_the_sdk() -> None:
    steps: list[Any] = [
        {"error": {"status": 429, "retry_after": 0.01}},
        {"tool_use": {"input": {"candidates": []}}},
    ]
    with ReplayServer(steps) as server:
        reply = ask(server, max_retries=1)
    assert reply.tool_input == {"candidates": []}
    assert len(server.requests) == 2


def test_529_overloaded_until_retries_run_out_is_unavailable() -> None:
    # no retry-after: the SDK's own exponential backoff waits between the two tries
    steps: list[Any] = [{"error": {"status": 529}}, {"error": {"status": 529}}]
    with ReplayServer(steps) as server, pytest.raises(LlmUnavailable) as info:
        ask(server, max_retries=1)
    assert len(server.requests) == 2
    assert "overloaded (529) after 1 retries" in str(info.value)


def test_500_after_retries_and_a_400_are_unavailable_with_the_status() -> None:
    boom = {"error": {"status": 500, "message": "boom"}}
    with ReplayServer([boom]) as server, pytest.raises(LlmUnavailable, match="HTTP 500: boom"):
        ask(server)
    bad = {"error": {"status": 400, "message": "max_tokens: too large"}}
    with ReplayServer([bad]) as server, pytest.raises(LlmUnavailable, match="refused"):
        ask(server, max_retries=2)
    assert len(server.requests) == 1  # a 400 is never retried


def test_rate_limited_after_retries() -> None:
    steps: list[Any] = [{"error": {"status": 429, "retry_after": 0.01}}] * 2
    with ReplayServer(steps) as server, pytest.raises(LlmUnavailable, match=r"rate-limited.*429"):
        ask(server, max_retries=1)


def test_wrong_key_is_a_clear_401() -> None:
    wrong = {"error": {"status": 401, "message": "invalid x-api-key"}}
    with ReplayServer([wrong]) as server, pytest.raises(LlmUnavailable) as info:
        ask(server, max_retries=2)
    assert "rejected the API key (401)" in str(info.value)
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert len(server.requests) == 1


def test_unreachable_base_url_names_it() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = LlmClient(LlmConfig(enabled=True, base_url=url, max_retries=0, timeout_s=5))
    with pytest.raises(LlmUnavailable) as info:
        client.create(REQUEST)
    assert f"at {url} is unreachable" in str(info.value)


def test_timeout() -> None:
    steps: list[Any] = [{"delay_s": 5, "text": "too late"}]
    started = time.monotonic()
    with (
        ReplayServer(steps) as server,
        pytest.raises(LlmUnavailable, match=r"timed out after 0\.5 s"),
    ):
        ask(server, timeout_s=0.5)
    assert time.monotonic() - started < 4


def test_malformed_body_is_unavailable_not_a_crash() -> None:
    garbled = {"raw": {"status": 200, "body": "{not json"}}
    with ReplayServer([garbled]) as server, pytest.raises(LlmUnavailable, match="unreadable"):
        ask(server)


def test_no_api_key_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LlmUnavailable, match="set ANTHROPIC_API_KEY"):
        LlmClient(LlmConfig(enabled=True))


def test_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with ReplayServer([{"tool_use": {"input": {"candidates": []}}}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        client = LlmClient(LlmConfig(enabled=True, max_retries=0))
        client.create(REQUEST)
        client.close()
    assert len(server.requests) == 1


def test_llm_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    assert llm_enabled(LlmConfig()) is True  # the key is set by the autouse fixture
    assert llm_enabled(LlmConfig(enabled=False)) is False
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert llm_enabled(LlmConfig()) is False
    assert llm_enabled(LlmConfig(enabled=True)) is True


def test_price() -> None:
    cfg = LlmConfig(price_in_per_mtok_usd=1.0, price_out_per_mtok_usd=10.0)
    assert price(cfg, 1_000_000, 100_000) == pytest.approx(2.0)


def test_server_script_from_json_and_exhaustion(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "one"}]}))
    with ReplayServer.from_file(script) as server:
        assert ask(server).text == "one"
        with pytest.raises(LlmUnavailable, match="replay script exhausted at request 2"):
            ask(server)
    (tmp_path / "bad.json").write_text('{"steps": 3}')
    with pytest.raises(ValueError, match="list of step objects"):
        load_script(tmp_path / "bad.json")


def test_callable_steps_and_responder_see_the_request() -> None:
    def echo(body: dict[str, Any]) -> dict[str, Any]:
        return {"text": body["messages"][0]["content"].upper()}

    with ReplayServer([echo], responder=echo) as server:
        assert ask(server).text == "THE EVIDENCE"
        assert ask(server).text == "THE EVIDENCE"
    assert len(server.bodies) == 2
