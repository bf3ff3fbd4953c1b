"""What a code host must do for patchit: open a pull request, or update the one already open.

One implementation per host (`patchit.delivery.github`); the rest of delivery only sees this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# GitHub refuses a pull-request body over 65,536 characters
MAX_BODY_CHARS = 60_000


@dataclass(frozen=True)
class PullRequestDraft:
    head: str  # the branch pushed to the remote, `patchit/<incident id>`
    base: str | None  # None: the repository's default branch
    title: str
    body: str
    number: int | None = None  # the pull request opened for this incident before, if any


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: str  # open, closed, merged
    base: str
    created: bool  # False: an existing pull request was updated


class ForgeError(Exception):
    """The code host refused or failed; the message is one line and never holds a token."""


class Forge(Protocol):
    name: str

    def open_or_update(self, draft: PullRequestDraft) -> PullRequest:
        """Update the draft's pull request (by number, else the open one from the same head),
        or open one: never a second pull request for one head."""
        ...


def capped_body(body: str, incident_id: str) -> str:
    if len(body) <= MAX_BODY_CHARS:
        return body
    return (
        body[:MAX_BODY_CHARS]
        + f"\n\n_(report cut at {MAX_BODY_CHARS:,} characters: `patchit report {incident_id}`"
        " prints all of it)_\n"
    )
