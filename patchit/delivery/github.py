"""GitHub's REST API (pulls and repos endpoints) through httpx.

Shapes as GitHub documents them (https://docs.github.com/en/rest/pulls/pulls):
`GET /repos/{owner}/{repo}` gives `default_branch`; `GET /repos/{owner}/{repo}/pulls?head=
owner:branch&state=all` lists a head's pull requests; `POST .../pulls` opens one (201);
`PATCH .../pulls/{number}` updates one. `api_url` points at GitHub Enterprise, or a local
server in tests. The token is sent in the Authorization header and nowhere else.
"""

from __future__ import annotations

from typing import Any

import httpx

from patchit.delivery.forge import ForgeError, PullRequest, PullRequestDraft

DEFAULT_API_URL = "https://api.github.com"


class GitHubForge:
    name = "github"

    def __init__(
        self,
        repo: str,
        token: str,
        api_url: str = DEFAULT_API_URL,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise ForgeError(f"[delivery] repo {repo!r}: expected owner/name")
        self.repo = repo
        self.owner = repo.split("/")[0]
        self._client = httpx.Client(
            base_url=api_url.rstrip("/"),
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "patchit",
            },
            timeout=timeout_s,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def open_or_update(self, draft: PullRequestDraft) -> PullRequest:
        existing = self._existing(draft)
        if existing is not None:
            if existing.get("merged_at"):
                return _pull(existing, created=False)  # merged: nothing left to update
            fields: dict[str, Any] = {"title": draft.title, "body": draft.body}
            if existing.get("state") == "closed":
                fields["state"] = "open"  # reopen rather than open a second one
            number = int(existing["number"])
            return _pull(self._call("PATCH", f"pulls/{number}", json=fields), created=False)
        base = draft.base or str(self._call("GET", "")["default_branch"])
        opened = self._call(
            "POST",
            "pulls",
            json={"title": draft.title, "head": draft.head, "base": base, "body": draft.body},
        )
        return _pull(opened, created=True)

    def _existing(self, draft: PullRequestDraft) -> dict[str, Any] | None:
        if draft.number is not None:
            found = self._call("GET", f"pulls/{draft.number}", missing_ok=True)
            if found and found.get("head", {}).get("ref") == draft.head:
                return dict(found)
        listed = self._call(
            "GET", "pulls", params={"head": f"{self.owner}:{draft.head}", "state": "all"}
        )
        pulls = [p for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []
        open_first = sorted(pulls, key=lambda p: (p.get("state") != "open", -int(p["number"])))
        return open_first[0] if open_first else None

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        url = f"/repos/{self.repo}" + (f"/{path}" if path else "")
        try:
            resp = self._client.request(method, url, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ForgeError(f"GitHub API {self._client.base_url}: {type(exc).__name__}") from exc
        if missing_ok and resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            raise ForgeError(f"GitHub API {method} {url}: {resp.status_code} {_message(resp)}")
        return resp.json()


def _message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.reason_phrase
    if not isinstance(data, dict):
        return resp.reason_phrase
    detail = [
        str(e.get("message") or e.get("code"))
        for e in data.get("errors", [])
        if isinstance(e, dict)
    ]
    return "; ".join([str(data.get("message", resp.reason_phrase)), *detail])[:300]


def _pull(data: dict[str, Any], *, created: bool) -> PullRequest:
    state = "merged" if data.get("merged_at") else str(data.get("state", "open"))
    return PullRequest(
        number=int(data["number"]),
        url=str(data["html_url"]),
        state=state,
        base=str(data.get("base", {}).get("ref", "")),
        created=created,
    )
