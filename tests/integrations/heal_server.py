"""A local HTTP server standing in for Airflow's `POST /api/v2/dags/{dag_id}/dagRuns`: it
records each request and answers as told (a run, a refusal, an error, or nothing in time).
`POST /auth/token` issues a token for one user; `GET /api/v2/dags/{dag_id}` answers 404: a
deployment without the heal DAG."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOGIN_TOKEN = "eyJ0eXAiOiJKV1QifQ.issued-for-a-login"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAirflow:
    """`status`: what the server answers; `delay_s`: how long it waits before answering."""

    status: int = 200
    delay_s: float = 0.0
    password: str = "s3cret-pa55word"  # what `POST /auth/token` accepts for user "patchit"
    requests: list[Seen] = field(default_factory=list)
    url: str = ""


def _handler(fake: FakeAirflow) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def do_GET(self) -> None:
            fake.requests.append(Seen("GET", self.path, dict(self.headers.items()), None))
            self._answer(404, {"detail": "The Dag with ID: `patchit_heal` was not found"})

        def _answer(self, status: int, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (its timeout): nothing to answer
                return

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw)
            fake.requests.append(Seen("POST", self.path, dict(self.headers.items()), body))
            time.sleep(fake.delay_s)
            if self.path == "/auth/token":
                if body == {"username": "patchit", "password": fake.password}:
                    self._answer(201, {"access_token": LOGIN_TOKEN})
                else:
                    self._answer(401, {"detail": "Invalid credentials"})
            elif fake.status == 200:
                self._answer(200, {"dag_run_id": body.get("dag_run_id"), "state": "queued"})
            else:
                self._answer(fake.status, {"detail": f"refused with {fake.status}"})

    return Handler


@contextmanager
def serve(fake: FakeAirflow) -> Iterator[FakeAirflow]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
