"""What `patchit ci` says in a pull request, through GitHub's REST API.

Shapes as GitHub documents them (API version 2022-11-28):
- `POST /repos/{o}/{r}/pulls/{n}/reviews` with `commit_id`, `event: COMMENT`, a body and
  `comments` (`path`, `line`, `side`, optional `start_line`/`start_side`): one review;
  `GET .../pulls/{n}/reviews` lists them (a review patchit made carries a hidden marker, so
  the same fix on the same commit is not suggested twice);
- `GET /repos/{o}/{r}/issues/{n}/comments`, `POST` to it, and
  `PATCH /repos/{o}/{r}/issues/comments/{id}`: the one summary comment, found by its marker
  and edited in place on every run;
- `POST /repos/{o}/{r}/statuses/{sha}` with `state`, `context`, `description`: the commit
  status `patchit` (a GITHUB_TOKEN needs `statuses: write`; a check run would need an app).

The client is `GitHubForge`'s (same headers, errors and timeouts): the token is sent in the
Authorization header to the one API URL it was built with, and nowhere else.
"""

from __future__ import annotations

from typing import Any

from patchit.delivery.github import GitHubForge

SUMMARY_MARKER = "<!-- patchit:summary -->"
MAX_PAGES = 10  # 1,000 comments: a pull request with more is not looked through further
STATUS_CONTEXT = "patchit"


class PullRequestThread(GitHubForge):
    """One pull request's reviews, comments and commit statuses."""

    def reviews(self, number: int) -> list[dict[str, Any]]:
        return self._pages(f"pulls/{number}/reviews")

    def review_comments(self, number: int) -> list[dict[str, Any]]:
        return self._pages(f"pulls/{number}/comments")

    def post_review(
        self, number: int, commit_id: str, body: str, comments: list[dict[str, object]]
    ) -> dict[str, Any]:
        review = {"commit_id": commit_id, "event": "COMMENT", "body": body, "comments": comments}
        return dict(self._call("POST", f"pulls/{number}/reviews", json=review))

    def upsert_summary(
        self, number: int, body: str, create: bool = True
    ) -> tuple[dict[str, Any] | None, bool]:
        """Edit the pull request's summary comment (the first with `SUMMARY_MARKER`), or post
        it unless not `create`: (the comment, created)."""
        if SUMMARY_MARKER not in body:
            body = f"{SUMMARY_MARKER}\n{body}"
        for comment in self._pages(f"issues/{number}/comments"):
            if SUMMARY_MARKER in str(comment.get("body") or ""):
                edited = self._call("PATCH", f"issues/comments/{int(comment['id'])}",
                                    json={"body": body})  # fmt: skip
                return dict(edited), False
        if not create:
            return None, False
        return dict(self._call("POST", f"issues/{number}/comments", json={"body": body})), True

    def set_status(self, sha: str, state: str, description: str, target_url: str = "") -> None:
        status = {"state": state, "context": STATUS_CONTEXT, "description": description[:140]}
        if target_url:
            status["target_url"] = target_url
        self._call("POST", f"statuses/{sha}", json=status)

    def _pages(self, path: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            listed = self._call("GET", path, params={"per_page": "100", "page": str(page)})
            items = [i for i in listed if isinstance(i, dict)] if isinstance(listed, list) else []
            found += items
            if len(items) < 100:
                break
        return found
