"""Whose settings a heal obeys: the operator's, and the repository's only where they narrow them.

A repository's `.patchit.toml` is written by whoever commits, including the commit that broke
the build. Left to it, a breaking commit could send the code host token to a server of its
choosing (`[delivery] api_url`), open its own pull request without a human (`mode`), or lift
the policy its fix is judged by. So:

- Settings that carry a credential or authority are the operator's: `$PATCHIT_HOME/patchit.toml`
  (any section of `.patchit.toml` may be set there) or the environment (`PATCHIT_WEBHOOK_URL`,
  `PATCHIT_AIRFLOW_API_URL`, `ANTHROPIC_BASE_URL`). In a repository's file they are kept only
  when equal to the operator's value (`OPERATOR_ONLY`); but where the operator names no
  `[delivery] repo`, a repository may name itself (the owner/name its push remote points at),
  so one operator's file serves many repositories.
- A repository may make the operator's limits stricter, never looser (`NARROWERS`): fewer files
  and lines, more deny and protected globs, allow globs inside the operator's, a delivery mode
  that waits for a human more often, a smaller model budget. Any other `[policy]` number is
  stricter when smaller; any other `[policy]` setting must equal the operator's.
  How far candidate code reaches is narrowed the same way: `[sandbox] isolation` (bubblewrap,
  auto, subprocess, strictest first), `network` (false before true), `pg_clone` ("never"
  before "auto": a copy holds up the database's new connections) and its size limit; the
  role it runs as on Postgres (`pg_role`) is the operator's alone.
- Everything else (the loop, the model's name, the memory limit, ...) is the repository's.
- The repository's file is read at the commit the failure is judged against (`rules_commit`:
  the project's last good commit, else the failing commit's parent), never at the breaking
  commit nor from the working tree. `patchit doctor` alone reads the working tree's file, to
  show what the next commit would set.

A setting refused is one line naming it and where to set it instead (`Settings.refused`, said
on stderr); the heal goes on without it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from patchit.config import PatchitConfig, field_error, load_deployment
from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.memory.outcomes import project_key_for
from patchit.sandbox.git import run_git

if TYPE_CHECKING:
    from patchit.memory import Memory

CONFIG_NAME = ".patchit.toml"
_SLUG = re.compile(r"[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/*$")
Key = tuple[str, str]

# Where a credential goes, or who decides that one is used: the operator's alone. The value is
# the environment variable that may set it instead of $PATCHIT_HOME/patchit.toml ("": none).
OPERATOR_ONLY: dict[Key, str] = {
    ("delivery", "api_url"): "",
    ("delivery", "provider"): "",
    ("delivery", "repo"): "",
    ("delivery", "remote"): "",
    ("notify", "webhook_url"): "PATCHIT_WEBHOOK_URL",
    ("airflow", "api_url"): "PATCHIT_AIRFLOW_API_URL",
    ("llm", "base_url"): "ANTHROPIC_BASE_URL",
    # the role candidate SQL runs as on a shared Postgres database: a repository naming one
    # could hand its hooks a role that writes production
    ("sandbox", "pg_role"): "",
    ("sandbox", "sf_role"): "",
}
# Sections whose every setting is a limit: one not named in NARROWERS is a number that is
# stricter when smaller, or else must equal the operator's.
NARROWED_SECTIONS = frozenset({"policy"})

# (the repository's value, the operator's) -> (the value kept, what was refused or "")
Narrower = Callable[[Any, Any], tuple[Any, str]]


def _smaller(repo: Any, operator: Any) -> tuple[Any, str]:
    if repo <= operator:
        return repo, ""
    return operator, f"= {repo!r} is looser than the operator's {operator!r}"


def _larger(repo: Any, operator: Any) -> tuple[Any, str]:
    if repo >= operator:
        return repo, ""
    return operator, f"= {repo!r} is looser than the operator's {operator!r}"


def _equal(repo: Any, operator: Any) -> tuple[Any, str]:
    if repo == operator:
        return repo, ""
    return operator, "differs from the operator's"


def _more(repo: list[str], operator: list[str]) -> tuple[list[str], str]:
    """Globs that refuse edits: the repository's are added; none of the operator's dropped."""
    kept = [*operator, *(glob for glob in repo if glob not in operator)]
    dropped = [glob for glob in operator if glob not in repo]
    return kept, (f"leaves out {', '.join(map(repr, dropped))} (kept)" if dropped else "")


def _covered(glob: str, operator: list[str]) -> bool:
    """Every path `glob` matches is matched by one of the operator's globs (decided only for
    the plain cases: the same glob, `*`, or a glob under an operator's `dir/*`)."""
    for own in operator:
        if glob == own or own in ("*", "**"):
            return True
        prefix = own.removesuffix("**").removesuffix("*")
        plain = own.endswith(("/*", "/**")) and not any(c in prefix for c in "*?[]")
        if plain and glob.startswith(prefix):
            return True
    return False


def _within(repo: list[str], operator: list[str]) -> tuple[list[str], str]:
    """Allow globs: only those inside the operator's; none left means the operator's."""
    inside = [glob for glob in repo if _covered(glob, operator)]
    outside = [glob for glob in repo if glob not in inside]
    if not outside:
        return inside, ""
    said = f"{', '.join(map(repr, outside))} reaches outside the operator's allow globs"
    return (inside or operator), said + (" (dropped)" if inside else "")


def _order(*strictest_first: str | bool) -> Narrower:
    def narrower(repo: Any, operator: Any) -> tuple[Any, str]:
        rank = {value: i for i, value in enumerate(strictest_first)}
        if repo == operator or rank.get(repo, len(rank)) <= rank.get(operator, -1):
            return repo, ""
        return operator, f"= {repo!r} is looser than the operator's {operator!r}"

    return narrower


NARROWERS: dict[Key, Narrower] = {
    ("policy", "allow"): _within,
    ("policy", "deny"): _more,
    ("policy", "protected"): _more,
    ("policy", "revert"): _order("review", "allow"),
    ("delivery", "mode"): _order("supervised", "threshold", "autonomous"),
    ("delivery", "min_confidence"): _larger,
    ("delivery", "critical_paths"): _more,
    # the operator's money: a repository may spend less of it
    ("llm", "max_tokens_per_incident"): _smaller,
    ("llm", "max_cost_per_incident_usd"): _smaller,
    ("llm", "max_tokens_per_day"): _smaller,
    ("llm", "max_cost_per_day_usd"): _smaller,
    # how far candidate code reaches: a repository may confine it more, never less
    ("sandbox", "isolation"): _order("bubblewrap", "auto", "subprocess"),
    ("sandbox", "network"): _order(False, True),
    # a copy of the operator's database holds up its new connections while it is made
    ("sandbox", "pg_clone"): _order("never", "auto"),
    ("sandbox", "pg_clone_limit_mb"): _smaller,
    ("sandbox", "sf_database"): _order("never", "auto"),
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _narrower(key: Key, repo: Any, operator: Any) -> Narrower | None:
    """How `key` may be narrowed; None when the repository sets it freely."""
    if key in NARROWERS:
        return NARROWERS[key]
    if key[0] in NARROWED_SECTIONS:
        return _smaller if _number(repo) and _number(operator) else _equal
    return None


@dataclass(frozen=True)
class Settings:
    """The settings a heal obeys; `refused`: one line per repository setting left out."""

    config: PatchitConfig
    refused: tuple[str, ...] = ()


def merge_settings(
    operator: PatchitConfig, repo: dict[str, Any], where: str, itself: str | None = None
) -> Settings:
    """The operator's settings with the repository's table (as read from its file) merged in
    where it may set them; `where` names the file in each refusal. `itself`: the owner/name
    the checkout's push remote points at, which `[delivery] repo` may name when the operator
    named none (a repository may say which it is, not send the token's work elsewhere)."""
    try:
        theirs = PatchitConfig.model_validate(repo)
    except ValidationError as exc:
        raise BadInputError(
            f"{where}: invalid patchit config: {field_error(exc)}; fix the file"
        ) from exc
    merged = operator.model_dump()
    refused: list[str] = []
    for section, table in repo.items():
        for name in table:
            key: Key = (section, name)
            value = getattr(getattr(theirs, section), name)
            current = getattr(getattr(operator, section), name)
            itself_named = key == ("delivery", "repo") and current is None and value == itself
            kept, why = (value, "") if itself_named else _decide(key, value, current)
            merged[section][name] = kept
            if why:
                refused.append(f"{where}: [{section}] {name} {why}; {_where_instead(key)}")
    return Settings(PatchitConfig.model_validate(merged), tuple(refused))


def _decide(key: Key, value: Any, current: Any) -> tuple[Any, str]:
    if key in OPERATOR_ONLY:
        if value == current:
            return value, ""
        return current, "is the operator's setting, ignored here"
    narrower = _narrower(key, value, current)
    if narrower is None:
        return value, ""
    kept, why = narrower(value, current)
    return kept, (f"{why}: a repository may only narrow it" if why else "")


def _where_instead(key: Key) -> str:
    env = OPERATOR_ONLY.get(key)
    return f"set it in $PATCHIT_HOME/patchit.toml{f' or {env}' if env else ''}"


def operator_config(home: Path) -> PatchitConfig:
    """The operator's settings: `$PATCHIT_HOME/patchit.toml` less its `[state]` and `[repos]`."""
    return PatchitConfig.model_validate(
        load_deployment(home).model_dump(include=set(PatchitConfig.model_fields))
    )


def rules_commit(repo: Path, last_good: str | None, failing: str | None) -> str | None:
    """The commit whose `.patchit.toml` judges a failure at `failing`: the project's last good
    commit, else the failing commit's parent; None when neither exists (a root commit, no git)."""
    for rev in (last_good, f"{failing or 'HEAD'}^"):
        if rev and not rev.startswith("-"):
            found = run_git(
                repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False
            ).strip()
            if found:
                return found
    return None


def remote_slug(repo: Path, remote: str) -> str | None:
    """`owner/name` of the URL the checkout's `remote` points at (its git config: the clone's
    owner set it, not a commit), else None."""
    if remote.startswith("-"):
        return None
    url = run_git(repo, "remote", "get-url", remote, check=False).strip()
    found = _SLUG.search(url) if url else None
    return found.group(1) if found else None


def narrow(operator: PatchitConfig, repo: Path | None, commit: str | None) -> Settings:
    """`operator`'s settings narrowed by `repo`'s `.patchit.toml` as of `commit` (None: no
    repository settings). A file that is not valid is said and left out, never a failed heal."""
    if repo is None or commit is None:
        return Settings(operator)
    where = f"{repo / CONFIG_NAME} at {commit[:12]}"
    try:  # no file at that commit: "" (the operator's settings as they are)
        text = run_git(repo, "show", f"{commit}:./{CONFIG_NAME}", check=False)
        itself = remote_slug(repo, operator.delivery.remote)
        return merge_settings(operator, _parse(text, where), where, itself)
    except UnicodeDecodeError:
        problem = f"{where}: not UTF-8 text; fix the file"
    except BadInputError as exc:  # a heal goes on: under the operator's settings alone
        problem = str(exc)
    return Settings(operator, (f"{problem} (ignored: the operator's settings apply)",))


def narrow_for(
    operator: PatchitConfig, event: UniversalFailureEvent, last_good: str | None
) -> Settings:
    """The settings `event`'s failure is judged by: `operator`'s, narrowed by the repository's
    file at `rules_commit` (`last_good`: the memory's for `project_key(event)`)."""
    if not event.repo_path:
        return Settings(operator)
    repo = Path(event.repo_path)
    return narrow(operator, repo, rules_commit(repo, last_good, event.commit))


def settings_in_worktree(home: Path, repo: Path | None) -> Settings:
    """The operator's settings narrowed by the working tree's file (`patchit doctor`: what
    the next commit would set; nothing healed reads it)."""
    operator = operator_config(home)
    path = repo / CONFIG_NAME if repo is not None else None
    if path is None or not path.is_file():
        return Settings(operator)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: cannot read ({exc}); fix or remove the file") from exc
    return merge_settings(operator, _parse(text, str(path)), str(path))


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)  # checked against the schema by merge_settings
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).splitlines()[0]
        raise BadInputError(f"{where}: invalid patchit config ({msg}); fix the file") from exc


def project_key(event: UniversalFailureEvent) -> str:
    """The project an event's unit belongs to, as the memory's last good commits are keyed."""
    return project_key_for(
        event.repo_path, event.dbt.project_dir if event.dbt else event.pipeline_id
    )


def incident_settings(home: Path, memory: Memory, incident_id: str) -> Settings:
    """The settings an incident is judged by today (`patchit pr`, `patchit track`): the
    operator's, narrowed by the repository's file at the rules commit of its latest event."""
    operator = operator_config(home)
    event = memory.latest_event(incident_id)
    if event is None:
        return Settings(operator)
    return narrow_for(operator, event, memory.last_good(project_key(event)))
