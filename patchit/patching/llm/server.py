"""A local HTTP server that speaks the Anthropic Messages API from a script (tests, the demo).

There is no network to a real model here, so the LLM tier is exercised with the real
`anthropic` client against this server. A script is a list of steps, served one per request
in order; each step is a dict (loadable from JSON) or, in tests, a callable computing the
step from the request body:

    {"tool_use": {"input": {...}, "name": "..."}}   a tool_use answer (name: the forced tool)
    {"text": "..."}                                  a plain text answer
    {"error": {"status": 529, "type": "overloaded_error", "message": "...",
               "retry_after": 0.01}}                 an HTTP error in Anthropic's JSON shape
    {"raw": {"status": 200, "body": "not json"}}     a body served verbatim
    any step: "usage": {"input_tokens": n, "output_tokens": m}, "delay_s": seconds

Every request is recorded (path, headers, body) so a test can assert what reached "the model",
e.g. that a planted secret never did. A request beyond the script gets a 400 naming it.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    raw: str

    @property
    def api_key(self) -> str | None:
        """The key the client sent: `x-api-key`, or a Bearer token (newer SDKs send that)."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None

    @property
    def body(self) -> dict[str, Any]:
        data = json.loads(self.raw) if self.raw else {}
        return data if isinstance(data, dict) else {}


def load_script(path: Path) -> list[Step]:
    """Steps from a JSON file: a list of step objects, or {"steps": [...]}."""
    data = json.loads(path.read_text(encoding="utf-8"))
    steps = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ValueError(f"{path}: a replay script is a JSON list of step objects")
    return list(steps)


def _estimate(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _forced_tool(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice") or {}
    if isinstance(choice, dict) and choice.get("name"):
        return str(choice["name"])
    tools = body.get("tools") or [{}]
    return str(tools[0].get("name", "tool"))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests read srv.requests, not stderr

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        number, step = owner._next(RecordedRequest("POST", self.path, headers, raw))
        if step is None:
            message = f"replay script exhausted at request {number}"
            self._send(400, _error_body("invalid_request_error", message))
            return
        if callable(step):
            step = step(json.loads(raw) if raw else {})
        delay = float(step.get("delay_s", 0))
        if delay and owner._closing.wait(delay):
            return  # the server is closing: drop the request
        self._answer(number, step, raw)

    def _answer(self, number: int, step: dict[str, Any], raw: str) -> None:
        if "error" in step:
            err = step["error"]
            status = int(err.get("status", 500))
            kind = err.get("type") or _ERROR_TYPES.get(status, "api_error")
            extra = {}
            if "retry_after" in err:
                extra["retry-after-ms"] = str(int(float(err["retry_after"]) * 1000))
                extra["retry-after"] = str(math.ceil(float(err["retry_after"])))
            self._send(status, _error_body(kind, err.get("message", kind)), extra)
            return
        if "raw" in step:
            payload = step["raw"]
            self._send(int(payload.get("status", 200)), str(payload.get("body", "")))
            return
        body = json.loads(raw) if raw else {}
        if "tool_use" in step:
            use = step["tool_use"]
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_replay_{number:04d}",
                    "name": use.get("name") or _forced_tool(body),
                    "input": use.get("input", {}),
                }
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": str(step.get("text", ""))}]
            stop = "end_turn"
        usage = step.get("usage") or {}
        message = {
            "id": f"msg_replay_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "replay"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": int(usage.get("input_tokens", _estimate(raw))),
                "output_tokens": int(usage.get("output_tokens", _estimate(json.dumps(content)))),
            },
        }
        self._send(200, json.dumps(message))

    def _send(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_replay")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # the client may have given up (a timeout test): nothing to do then
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)


def _error_body(kind: str, message: str) -> str:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ReplayServer


class ReplayServer:
    """`with ReplayServer(steps) as srv:` point a client at `srv.base_url`, read `srv.requests`.

    `responder`, when given, answers every request after the scripted steps run out (a test
    that proposes several times with the same evidence).
    """

    def __init__(
        self, steps: list[Step], responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> None:
        self.steps = list(steps)
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: Path) -> ReplayServer:
        return cls(load_script(path))

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("ReplayServer is not started; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def _next(self, request: RecordedRequest) -> tuple[int, Step | None]:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            if number <= len(self.steps):
                return number, self.steps[number - 1]
            return number, self.responder

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="replay-server", daemon=True
        )  # a short poll interval: closing the server is a test's hot path
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
