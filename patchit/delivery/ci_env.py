"""The pull request a CI job runs for, read from the environment GitHub Actions gives it.

`patchit ci` must know, before dbt starts, which pull request it heals (number, head and base
branches and commits), where the code host's API is and whether it may write there. GitHub
Actions says so in variables (https://docs.github.com/en/actions/reference/variables-reference)
and in the event payload at `GITHUB_EVENT_PATH` (a `pull_request` webhook payload). A job
that is not a pull request's, or whose environment is partial, is one line naming the variable
and what to do (exit 2), never a traceback half-way through a build.

Write access is judged here, not discovered by a 403 later: a pull request from a fork gets a
read-only token (GitHub withholds write tokens from forks' workflows), and a job may pass no
token at all. Either way nothing is pushed and nothing is sent: the summary goes to the job's
step summary and a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError

REQUIRED = ("GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_HEAD_REF",
            "GITHUB_BASE_REF")  # fmt: skip
DEFAULT_API_URL = "https://api.github.com"
TOKEN_ENV = "GITHUB_TOKEN"


@dataclass(frozen=True)
class PullRequestJob:
    """One CI job of one pull request, as the environment describes it."""

    repository: str  # owner/name the job runs in (the base repository)
    number: int
    head_ref: str
    head_sha: str
    head_repository: str  # owner/name the head branch lives in: a fork's differs
    base_ref: str
    base_sha: str
    sha: str  # GITHUB_SHA: the commit the job checked out (often the test merge commit)
    api_url: str  # GITHUB_API_URL, or GitHub's when unset
    token: str  # "" when the job passed none
    step_summary: Path | None
    url: str = ""  # the pull request's page

    @property
    def from_fork(self) -> bool:
        return self.head_repository.lower() != self.repository.lower()

    @property
    def can_write(self) -> bool:
        return bool(self.token) and not self.from_fork

    def read_only_reason(self) -> str:
        if self.from_fork:
            fork = self.head_repository or "a deleted fork"
            return f"the pull request comes from {fork}: its token is read-only"
        return f"no {TOKEN_ENV} in the job's environment (pass `secrets.GITHUB_TOKEN`)"


def read_pull_request_job(
    environ: Mapping[str, str] | None = None, command: str = "patchit ci"
) -> PullRequestJob:
    """The job's pull request; BadInputError naming the first variable that is missing or wrong
    (and `command`, the one that needs it)."""
    env = os.environ if environ is None else environ
    for name in REQUIRED:
        if not env.get(name, "").strip():
            raise BadInputError(_missing(name, command))
    repository = env["GITHUB_REPOSITORY"].strip()
    if not _slug(repository):
        raise BadInputError(
            f"GITHUB_REPOSITORY={repository!r}: expected owner/name, as GitHub Actions sets it"
        )
    payload = _payload(Path(env["GITHUB_EVENT_PATH"]))
    pull = payload.get("pull_request")
    if not isinstance(pull, dict):
        raise BadInputError(
            f"GITHUB_EVENT_PATH {env['GITHUB_EVENT_PATH']}: not a pull_request event (no "
            f"`pull_request` object); run `{command}` on `pull_request` events only"
        )
    head, base = _side(pull, "head", env), _side(pull, "base", env)
    for name, side in (("GITHUB_HEAD_REF", head), ("GITHUB_BASE_REF", base)):
        if env[name].strip() != side["ref"]:
            raise BadInputError(
                f"{name}={env[name].strip()!r} differs from the event's {side['ref']!r} "
                f"(GITHUB_EVENT_PATH): the environment is not this pull request's"
            )
    number = pull.get("number", payload.get("number"))
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise BadInputError(_field("pull_request.number", env))
    summary = env.get("GITHUB_STEP_SUMMARY", "").strip()
    return PullRequestJob(
        repository=repository,
        number=number,
        head_ref=head["ref"],
        head_sha=head["sha"],
        head_repository=head["repo"],  # "": a deleted fork
        base_ref=base["ref"],
        base_sha=base["sha"],
        sha=env["GITHUB_SHA"].strip(),
        api_url=(env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL).rstrip("/"),
        token=env.get(TOKEN_ENV, "").strip(),
        step_summary=Path(summary) if summary else None,
        url=str(pull.get("html_url") or ""),
    )


def _missing(name: str, command: str) -> str:
    return (f"{name} is not set: `{command}` runs in a GitHub Actions job of a pull_request "
            "event (see docs/how-to/ci.md), which sets it")  # fmt: skip


def _field(name: str, env: Mapping[str, str]) -> str:
    return (f"GITHUB_EVENT_PATH {env['GITHUB_EVENT_PATH']}: the event has no valid `{name}`; "
            "it is not a pull_request payload as GitHub writes it")  # fmt: skip


def _payload(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInputError(
            f"GITHUB_EVENT_PATH {path}: no such file; it must name the job's event payload"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(
            f"GITHUB_EVENT_PATH {path}: not readable JSON ({type(exc).__name__}); it must name "
            "the job's event payload"
        ) from exc
    if not isinstance(data, dict):
        raise BadInputError(f"GITHUB_EVENT_PATH {path}: not a JSON object; not an event payload")
    return data


def _side(pull: dict[str, Any], side: str, env: Mapping[str, str]) -> dict[str, str]:
    """`pull_request.head` or `.base`: its ref, sha and repository's owner/name ("" if none:
    a deleted fork)."""
    found = pull.get(side)
    if not isinstance(found, dict):
        raise BadInputError(_field(f"pull_request.{side}", env))
    out = {}
    for key in ("ref", "sha"):
        value = found.get(key)
        if not isinstance(value, str) or not value.strip() or value.startswith("-"):
            raise BadInputError(_field(f"pull_request.{side}.{key}", env))
        out[key] = value.strip()
    repo = found.get("repo")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    out["repo"] = name if isinstance(name, str) and _slug(name) else ""
    return out


def _slug(text: str) -> bool:
    return text.count("/") == 1 and all(text.split("/")) and not text.startswith("-")
