"""A local HTTP server that speaks the part of GitHub's REST API `patchit pr` and `patchit ci`
use.

Shapes from GitHub's documentation (repos, pulls, reviews, issue comments and statuses
endpoints, API version 2022-11-28): a token is required (401 "Bad credentials"), a pull
request's head must exist on the remote (422 "Validation Failed"), a second open pull request
for one head is refused (422 "A pull request already exists for owner:branch."). A review
comment must sit on a line of the pull request's diff (the RIGHT side at the review's
commit, with three lines of context), else 422 "Line could not be resolved", as GitHub
answers; the diff is read from the bare remote.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class FakeGitHub:
    repo: str  # owner/name
    remote: Path  # the bare repository branches are pushed to
    token: str
    default_branch: str = "main"
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # issue comments by id
    statuses: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def add_pull(self, number: int, head: str, base: str) -> dict[str, Any]:
        """A pull request someone opened (the one a CI job runs for), head and base as on the
        remote now."""
        sha = lambda ref: self._git("rev-parse", f"refs/heads/{ref}")  # noqa: E731
        self.pulls[number] = {
            "number": number, "state": "open", "title": f"change {head}", "body": "",
            "html_url": f"https://github.example/{self.repo}/pull/{number}",
            "head": {"ref": head, "sha": sha(head), "repo": {"full_name": self.repo}},
            "base": {"ref": base, "sha": sha(base), "repo": {"full_name": self.repo}},
            "merged_at": None,
        }  # fmt: skip
        return self.pulls[number]

    def _git(self, *args: str) -> str:
        res = subprocess.run(["git", "-C", str(self.remote), *args], capture_output=True,
                             text=True, check=True)  # fmt: skip
        return res.stdout.strip()

    def _diff_lines(self, number: int, commit: str) -> dict[str, set[int]]:
        pull = self.pulls[number]
        base = self._git("merge-base", pull["base"]["sha"], commit)
        shown: dict[str, set[int]] = {}
        path = ""
        for line in self._git("diff", "-U3", base, commit).splitlines():
            if line.startswith("+++ "):
                path = line[6:]
            elif line.startswith("@@"):
                new = line.split(" ")[2][1:].split(",")
                start, count = int(new[0]), int(new[1]) if len(new) > 1 else 1
                shown.setdefault(path, set()).update(range(start, start + count))
        return shown

    def _head_exists(self, branch: str) -> bool:
        res = subprocess.run(
            ["git", "-C", str(self.remote), "rev-parse", "--verify", "--quiet",
             f"refs/heads/{branch}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return res.returncode == 0

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any,
               auth: str) -> tuple[int, Any]:  # fmt: skip
        self.requests.append({"method": method, "path": path, "body": body, "auth": auth})
        if auth != f"Bearer {self.token}":
            return 401, {
                "message": "Bad credentials",
                "documentation_url": "https://docs.github.com/rest",
            }
        prefix = f"/repos/{self.repo}"
        if not path.startswith(prefix):
            return 404, {"message": "Not Found"}
        rest = path[len(prefix) :]
        if rest == "" and method == "GET":
            return 200, {"full_name": self.repo, "default_branch": self.default_branch}
        if rest == "/pulls" and method == "GET":
            head = query.get("head", [""])[0]
            state = query.get("state", ["open"])[0]
            found = [p for p in self.pulls.values()
                     if f"{self.repo.split('/')[0]}:{p['head']['ref']}" == head
                     and (state == "all" or p["state"] == state)]  # fmt: skip
            return 200, found
        if rest == "/pulls" and method == "POST":
            return self._open(body)
        if rest.startswith("/statuses/") and method == "POST":
            self.statuses.append({"sha": rest.rsplit("/", 1)[-1], **body})
            return 201, {"id": len(self.statuses), **body}
        if rest.startswith("/issues/"):
            return self._issues(method, rest, body)
        if rest.startswith("/pulls/") and rest.count("/") == 3:
            return self._review(method, rest, body)
        if rest.startswith("/pulls/"):
            number = int(rest.rsplit("/", 1)[-1])
            if number not in self.pulls:
                return 404, {"message": "Not Found"}
            pull = self.pulls[number]
            if method == "GET":
                return 200, pull
            if method == "PATCH":
                for key in ("title", "body", "state", "base"):
                    if key in body:
                        pull[key] = body[key] if key != "base" else {"ref": body[key]}
                return 200, pull
        return 404, {"message": "Not Found"}

    def _open(self, body: dict[str, Any]) -> tuple[int, Any]:
        missing = [k for k in ("title", "head", "base") if not body.get(k)]
        if missing or not self._head_exists(body["head"]):
            error = {"resource": "PullRequest", "field": "head", "code": "invalid"}
            return 422, {"message": "Validation Failed", "errors": [error]}
        owner = self.repo.split("/")[0]
        if any(
            p["head"]["ref"] == body["head"] and p["state"] == "open" for p in self.pulls.values()
        ):
            message = f"A pull request already exists for {owner}:{body['head']}."
            error = {"resource": "PullRequest", "code": "custom", "message": message}
            return 422, {"message": "Validation Failed", "errors": [error]}
        number = max(self.pulls, default=0) + 1
        self.pulls[number] = {
            "number": number, "state": "open", "title": body["title"], "body": body.get("body"),
            "html_url": f"https://github.example/{self.repo}/pull/{number}",
            "head": {"ref": body["head"]}, "base": {"ref": body["base"]}, "merged_at": None,
        }  # fmt: skip
        return 201, self.pulls[number]

    def _issues(self, method: str, rest: str, body: Any) -> tuple[int, Any]:
        parts = rest.strip("/").split("/")  # issues/{n}/comments or issues/comments/{id}
        if parts[1] == "comments" and method == "PATCH":
            comment = self.comments.get(int(parts[2]))
            if comment is None:
                return 404, {"message": "Not Found"}
            comment["body"] = body["body"]
            return 200, comment
        number = int(parts[1])
        if number not in self.pulls:
            return 404, {"message": "Not Found"}
        if method == "GET":
            return 200, [c for c in self.comments.values() if c["issue"] == number]
        cid = 1000 + len(self.comments)
        self.comments[cid] = {
            "id": cid, "issue": number, "body": body["body"],
            "html_url": f"https://github.example/{self.repo}/pull/{number}#issuecomment-{cid}",
        }  # fmt: skip
        return 201, self.comments[cid]

    def _review(self, method: str, rest: str, body: Any) -> tuple[int, Any]:
        _pulls, number_text, what = rest.strip("/").split("/")
        number = int(number_text)
        if number not in self.pulls:
            return 404, {"message": "Not Found"}
        reviews = self.reviews.setdefault(number, [])
        if method == "GET" and what == "reviews":
            return 200, [{k: v for k, v in r.items() if k != "comments"} for r in reviews]
        if method == "GET" and what == "comments":
            return 200, [c for r in reviews for c in r["comments"]]
        if method != "POST" or what != "reviews":
            return 404, {"message": "Not Found"}
        shown = self._diff_lines(number, body["commit_id"])
        for comment in body.get("comments", []):
            lines = range(comment.get("start_line", comment["line"]), comment["line"] + 1)
            if comment.get("side", "RIGHT") != "RIGHT" or not set(lines) <= shown.get(
                comment["path"], set()
            ):
                return 422, {"message": "Unprocessable Entity",
                             "errors": ["Line could not be resolved"]}  # fmt: skip
        rid = len(reviews) + 1
        review = {
            "id": rid, "body": body.get("body", ""), "commit_id": body["commit_id"],
            "state": "COMMENTED", "comments": body.get("comments", []),
            "html_url": f"https://github.example/{self.repo}/pull/{number}#review-{rid}",
        }  # fmt: skip
        reviews.append(review)
        return 200, review


@contextmanager
def serve(github: FakeGitHub) -> Iterator[FakeGitHub]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            status, data = github.handle(self.command, parts.path, parse_qs(parts.query), body,
                                         self.headers.get("Authorization", ""))  # fmt: skip
            out = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PATCH = _reply

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        # a loaded CI machine may not accept at once: a short backlog resets connections
        request_queue_size = 128
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    github.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield github
    finally:
        server.shutdown()
        server.server_close()
