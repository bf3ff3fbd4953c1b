"""Webhook notifications after a real heal: Slack-compatible JSON on a local HTTP server,
retried with backoff from a bounded queue, never holding a secret."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from patchit.config import NotifyConfig, PatchitConfig
from patchit.delivery.notify import flush, notify
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.loop.context import Context
from patchit.memory import Memory
from tests.test_loop_fast import JOB, RIGHT, Scripted, edit, run


class Hook:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.statuses: list[int] = []  # answers to give, then 200
        self.url = ""


@pytest.fixture
def hook() -> Iterator[Hook]:
    state = Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status = state.statuses.pop(0) if state.statuses else 200
            if status == 200:
                state.received.append(json.loads(body))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


def test_a_fix_is_announced_with_branch_and_commands(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, hook: Hook,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    secret = "s3cr3t-value-for-the-warehouse"
    monkeypatch.setenv("WAREHOUSE_PASSWORD", secret)
    config = PatchitConfig.model_validate({"notify": {"webhook_url": hook.url}})
    ctx = Context(_patchit_home, memory, config, [Scripted([edit(RIGHT, "rename_key")])],
                  [FakeHarness.passing_when(JOB, RIGHT)])  # fmt: skip
    incident = run(ctx, event).incident
    [msg] = hook.received
    assert msg["patchit"] == {"incident": incident.id, "kind": "fixed", "status": "fixed",
                              "branch": incident.branch, "pull_request": None}  # fmt: skip
    assert f"incident {incident.id} fixed" in msg["text"]
    assert "git " in msg["text"] and msg["blocks"][0]["text"]["text"] == msg["text"]
    assert secret not in json.dumps(msg)
    assert memory.pending_notifications() == 0


def test_failed_sends_are_retried_then_dropped(
    memory: Memory, hook: Hook, event: UniversalFailureEvent
) -> None:
    incident = memory.create_incident(event, "fp", "ck")
    config = NotifyConfig(webhook_url=hook.url, max_tries=3)
    hook.statuses = [500, 503]
    notify(incident, config, memory, [], kind="escalated")  # 500: queued, retry in 2 s
    assert memory.pending_notifications() == 1 and hook.received == []
    assert flush(memory, config) == 0  # not due yet: nothing sent
    assert flush(memory, config, now=1e12) == 0  # 503
    assert flush(memory, config, now=2e12) == 1  # delivered
    assert memory.pending_notifications() == 0 and len(hook.received) == 1
    hook.statuses = [500, 500, 500]
    notify(incident, config, memory, [], kind="escalated")
    flush(memory, config, now=1e12)
    flush(memory, config, now=2e12)
    assert memory.pending_notifications() == 0 and len(hook.received) == 1  # dropped after 3


def test_the_queue_is_bounded(memory: Memory, event: UniversalFailureEvent) -> None:
    incident = memory.create_incident(event, "fp", "ck")
    config = NotifyConfig(webhook_url="http://127.0.0.1:9/unreachable", max_queue=5, max_tries=9)
    for _ in range(12):
        notify(incident, config, memory, [], kind="failed")
    assert memory.pending_notifications() == 5


def test_kinds_not_wanted_are_not_sent(
    memory: Memory, hook: Hook, event: UniversalFailureEvent
) -> None:
    incident = memory.create_incident(event, "fp", "ck")
    notify(incident, NotifyConfig(webhook_url=hook.url, on=["fixed"]), memory, [], kind="failed")
    assert hook.received == [] and memory.pending_notifications() == 0
