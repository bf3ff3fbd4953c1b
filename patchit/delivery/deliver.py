"""`patchit pr ID`: push a verified fix's branch and open (or update) its pull request.

Only a fix that is verified, policy-clean under today's policy and clean in the data check
leaves the machine. The body is the incident's Markdown report; the token comes from
`GITHUB_TOKEN` and is never stored, logged or written into the body. Where the token goes
(`[delivery] provider`, `repo`, `api_url`, `remote`) is the operator's to say, never a
repository's (`patchit.policy.settings`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from patchit.config import DeliveryConfig, PatchitConfig, PolicyConfig
from patchit.delivery.forge import Forge, ForgeError, PullRequest, PullRequestDraft, capped_body
from patchit.delivery.github import GitHubForge
from patchit.errors import BadInputError, PatchitError
from patchit.evidence.redact import redact
from patchit.intake.worktree_snapshot import is_snapshot
from patchit.memory import Memory
from patchit.memory.deliveries import Delivery
from patchit.memory.records import Incident, IncidentStatus
from patchit.policy.policy import check_path
from patchit.policy.renames import count_files
from patchit.policy.settings import incident_settings
from patchit.reports.refresh import refresh_report
from patchit.sandbox.git import run_git
from patchit.state.home import resolve_home

TOKEN_ENV = "GITHUB_TOKEN"
ForgeFactory = Callable[[DeliveryConfig, str], Forge]


class DeliveryError(PatchitError):
    """The push or the code host failed (exit 1): nothing was recorded as delivered."""


def github_forge(config: DeliveryConfig, token: str) -> Forge:
    assert config.repo is not None
    return GitHubForge(config.repo, token, config.api_url, config.timeout_s)


def deliver(
    incident_id: str,
    memory: Memory,
    forge_factory: ForgeFactory = github_forge,
    config: PatchitConfig | None = None,
    *,
    home: Path | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> PullRequest:
    """`config`: the settings the incident was healed under (default: `incident_settings`
    for `home`, each repository setting refused said through `say`)."""
    incident = memory.get_incident(incident_id)
    repo, branch = _deliverable(incident)
    if is_snapshot(repo, f"refs/heads/{branch}~1"):
        raise BadInputError(
            f"incident {incident_id}: its fix sits on a snapshot of uncommitted work, which a "
            f"pull request would publish under patchit's name; run `patchit apply "
            f"{incident_id}`, then commit and push your own branch"
        )
    if config is None:
        settings = incident_settings(home or resolve_home(), memory, incident.id)
        for line in settings.refused:
            say(line)
        config = settings.config
    delivery = _delivery_config(config.delivery, repo)
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise BadInputError(
            f"{TOKEN_ENV} is not set; export a token that may push to and open pull requests "
            f"on {delivery.repo}"
        )
    _check_policy(repo, branch, config.policy, incident_id, _follows(memory, incident_id, branch))
    _push(repo, delivery.remote, branch)
    previous = memory.delivery_for(incident_id)
    draft = PullRequestDraft(
        head=branch,
        base=delivery.base,
        title=run_git(repo, "log", "-1", "--format=%s", f"refs/heads/{branch}").strip(),
        body=capped_body(redact(_body(incident), [token]), incident_id),
        number=previous.number if previous else None,
    )
    forge = forge_factory(delivery, token)
    try:
        pull = forge.open_or_update(draft)
    except ForgeError as exc:
        raise DeliveryError(str(exc).replace(token, "***")) from exc
    finally:
        close = getattr(forge, "close", None)
        if callable(close):
            close()
    assert delivery.provider is not None and delivery.repo is not None
    memory.record_delivery(
        Delivery(incident_id, delivery.provider, delivery.repo, pull.number, pull.url,
                 pull.state, branch, pull.base)
    )  # fmt: skip
    refresh_report(memory, incident_id)  # the report names its pull request from now on
    return pull


def _deliverable(incident: Incident) -> tuple[Path, str]:
    why = f"`patchit report {incident.id}` says why"
    if incident.status is not IncidentStatus.FIXED or not incident.branch:
        raise BadInputError(
            f"incident {incident.id} is {incident.status.value}: only a verified fix is "
            f"delivered ({why})"
        )
    if incident.needs_review:
        raise BadInputError(
            f"incident {incident.id}: its fix changed outputs the data check did not expect; "
            f"review it first ({why})"
        )
    if not incident.repo_path:
        raise BadInputError(f"incident {incident.id}: no repository recorded; heal it again")
    repo = Path(incident.repo_path)
    ref = f"refs/heads/{incident.branch}"
    if not run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip():
        raise BadInputError(
            f"incident {incident.id}: branch {incident.branch} no longer exists in {repo}; "
            f"heal it again with `patchit heal {incident.id}`"
        )
    return repo, incident.branch


def _delivery_config(delivery: DeliveryConfig, repo: Path) -> DeliveryConfig:
    if delivery.provider is None or not delivery.repo:
        raise BadInputError(
            f'no [delivery] target for {repo}: set [delivery] provider = "github" and repo = '
            "\"owner/name\" in $PATCHIT_HOME/patchit.toml (the operator's; a repository's "
            ".patchit.toml may name only itself as repo)"
        )
    return delivery


def _check_policy(
    repo: Path, branch: str, policy: PolicyConfig, incident_id: str, follows: dict[str, str]
) -> None:
    ref = f"refs/heads/{branch}"
    files = run_git(repo, "diff", "--name-only", f"{ref}~1", ref).split()
    refusals = [r for r in (check_path(f, policy) for f in files) if r]
    contents = {f: (_show(repo, f"{ref}~1", f), _show(repo, ref, f)) for f in files}
    _sites, too_many = count_files(contents, follows, policy.max_files, policy.max_rename_sites)
    if too_many:
        refusals.append(too_many)
    if refusals:
        raise BadInputError(
            f"incident {incident_id}: today's policy refuses the fix ({refusals[0]}); "
            "nothing was pushed"
        )


def _show(repo: Path, commit: str, path: str) -> str:
    return run_git(repo, "show", f"{commit}:{path}", check=False)


def _follows(memory: Memory, incident_id: str, branch: str) -> dict[str, str]:
    """The renames the fix on `branch` follows (its verified candidate declares them)."""
    for attempt in memory.verified_for(incident_id):
        if attempt.landed_branch == branch and attempt.verified_json:
            candidate = json.loads(attempt.verified_json).get("candidate") or {}
            follows = candidate.get("follows") or {}
            return {str(k): str(v) for k, v in follows.items()} if isinstance(follows, dict) else {}
    return {}


def _push(repo: Path, remote: str, branch: str) -> None:
    remotes = run_git(repo, "remote").split()
    if remote not in remotes:
        raise BadInputError(
            f"{repo}: no git remote {remote!r} (remotes: {', '.join(remotes) or 'none'}); "
            "add it, or set [delivery] remote"
        )
    ref = f"refs/heads/{branch}"
    # never forced: commits a reviewer pushed to the branch are not overwritten
    out = run_git(
        repo, "push", "--porcelain", remote, f"{ref}:{ref}", check=False, timeout_s=120,
        config=["credential.interactive=never"], env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )  # fmt: skip
    if not any(line.startswith(("=\t", "*\t", " \t", "+\t")) for line in out.splitlines()):
        raise DeliveryError(
            f"git push {remote} {branch} was refused ({_push_error(out)}); pull the branch, "
            "merge what the remote has, or delete the remote branch"
        )


def _push_error(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("!"):
            return line.split("\t")[-1].strip()
    return "see `git push` for details"


def _body(incident: Incident) -> str:
    report = Path(incident.report_md or "")
    text = report.read_text(encoding="utf-8") if report.is_file() else incident.summary
    return (
        f"{text}\n\n---\nOpened by patchit for incident `{incident.id}` after the fix was "
        "verified in a sandbox. Inspect it locally: "
        f"`git worktree add ../patchit-{incident.id} {incident.branch}`.\n"
    )
