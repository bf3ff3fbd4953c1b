"""Fake Airflow REST API servers for the tests: one local HTTP server helper (`serving`), one
handler base that answers JSON (`AirflowApiHandler`), and the fake of
`POST /api/v2/dags/{dag_id}/dagRuns` that the heal-DAG tests trigger (`FakeAirflow`, `serve`).

Tests of other endpoints (task instances and their logs, import errors) subclass
`AirflowApiHandler` with their own `do_GET` and serve it with `serving`."""

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


class AirflowApiHandler(BaseHTTPRequestHandler):
    """A quiet request handler that answers JSON as Airflow's API server does."""

    def log_message(self, *_args: Any) -> None:
        return

    def answer_json(self, status: int, data: object) -> None:
        body = json.dumps(data).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (its timeout): nothing to answer
            return


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on a free local port in a thread; its base URL. Shut down on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# -- the heal DAG's trigger: POST /api/v2/dags/{dag_id}/dagRuns --------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAirflow:
    """Airflow's `POST /api/v2/dags/{dag_id}/dagRuns`: records each request and answers as
    told (a run, a refusal, an error, or nothing in time). `POST /auth/token` issues a token
    for one user; `GET /api/v2/dags/{dag_id}` answers 404: a deployment without the heal DAG.

    `status`: what the server answers; `delay_s`: how long it waits before answering."""

    status: int = 200
    delay_s: float = 0.0
    password: str = "s3cret-pa55word"  # what `POST /auth/token` accepts for user "patchit"
    requests: list[Seen] = field(default_factory=list)
    url: str = ""


def _dag_runs_handler(fake: FakeAirflow) -> type[BaseHTTPRequestHandler]:
    class Handler(AirflowApiHandler):
        def do_GET(self) -> None:
            fake.requests.append(Seen("GET", self.path, dict(self.headers.items()), None))
            self.answer_json(404, {"detail": "The Dag with ID: `patchit_heal` was not found"})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw)
            fake.requests.append(Seen("POST", self.path, dict(self.headers.items()), body))
            time.sleep(fake.delay_s)
            if self.path == "/auth/token":
                if body == {"username": "patchit", "password": fake.password}:
                    self.answer_json(201, {"access_token": LOGIN_TOKEN})
                else:
                    self.answer_json(401, {"detail": "Invalid credentials"})
            elif fake.status == 200:
                self.answer_json(200, {"dag_run_id": body.get("dag_run_id"), "state": "queued"})
            else:
                self.answer_json(fake.status, {"detail": f"refused with {fake.status}"})

    return Handler


@contextmanager
def serve(fake: FakeAirflow) -> Iterator[FakeAirflow]:
    """`fake` served; its `url` set."""
    with serving(_dag_runs_handler(fake)) as url:
        fake.url = url
        yield fake
