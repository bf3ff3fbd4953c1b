"""Configuration: the state dir (`PATCHIT_HOME`), policy and loop limits.

Read from `.patchit.toml` at the repository root when present; every key is optional.
A deployment's own settings, chosen before any repository is known (where the shared state
lives, where each repository is checked out on this host), are in `$PATCHIT_HOME/patchit.toml`
(`DeploymentConfig`, read with the standard library by `patchit.state.url`), with the operator's
own `.patchit.toml` sections: `patchit.policy.settings` decides which of a repository's settings may
change them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from patchit.errors import BadInputError
from patchit.state.home import resolve_home as resolve_home  # re-exported
from patchit.state.url import deployment_file, read_deployment

DEFAULT_DENY = [
    "*.env*",
    "*secret*",
    "*credential*",
    "migrations/*",
    "**/migrations/*",
    "profiles.yml",
    "**/profiles.yml",
]


# Files that run with more power than the pipeline, or steer patchit itself: CI configuration,
# patchit's own config, hooks, install-time code and what decides what gets installed (a
# dependency added by a candidate is a supply-chain change, never a fix), and Python that runs
# on its own when an interpreter or a build starts. Denied unless the operator drops a glob from
# `[policy] protected` (a `deny` list leaves these in force; a repository may only add to both).
PROTECTED = [
    ".github/**",
    ".gitlab-ci.yml",
    ".patchit.toml",
    ".pre-commit-config.yaml",
    ".gitmodules",
    "setup.py",
    "conftest.py",
    "setup.cfg",
    "pyproject.toml",
    "requirements*.txt",
    "packages.yml",
    "dependencies.yml",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "Makefile",
    "Dockerfile",
]


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(
        default_factory=lambda: ["*"], description="globs of the files a candidate may edit"
    )
    deny: list[str] = Field(
        default_factory=lambda: list(DEFAULT_DENY),
        description="globs of the files a candidate may never edit (secrets, migrations, profiles)",
    )
    protected: list[str] = Field(
        default_factory=lambda: list(PROTECTED),
        description="CI config, patchit's config, hooks, install-time code: never edited "
        "unless removed from this list",
    )
    max_files: int = Field(default=3, description="distinct files one candidate may touch")
    max_lines: int = Field(default=40, description="changed lines one candidate may have")
    max_rename_sites: int = Field(
        default=50,
        ge=0,
        description="files a rename of the breaking change may be followed to in one "
        "candidate (its sites count as one file against max_files)",
    )
    revert: Literal["review", "allow"] = Field(
        default="review",
        description="review: a candidate that undoes an intent of the breaking change (a "
        "rename, a new column) ends needs_review, never on a branch; allow: it may land",
    )


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(
        default=6,
        description="verified candidates per error fingerprint (a sandbox limit hit does not "
        "count)",
    )
    harness_timeout_s: float = Field(
        default=600.0, description="the time limit of one harness run (one verification)"
    )


class LlmConfig(BaseModel):
    """The model tier (tier 1). Off unless `ANTHROPIC_API_KEY` is set or `enabled = true`."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = Field(
        default=None, description="None: on exactly when ANTHROPIC_API_KEY is set"
    )
    model: str = Field(default="claude-sonnet-5", description="the model asked")
    max_tokens: int = Field(default=4096, ge=256, description="output tokens of one call")
    base_url: str | None = Field(default=None, description="else ANTHROPIC_BASE_URL")
    timeout_s: float = Field(default=120.0, gt=0, description="one call's time limit")
    max_retries: int = Field(
        default=2, ge=0, description="the SDK's own retries with backoff (429, 5xx, overloaded)"
    )
    candidates_per_round: int = Field(
        default=2, ge=1, le=5, description="candidates asked for in one call"
    )
    max_rounds: int = Field(default=2, ge=1, description="calls per incident")
    context_tokens: int = Field(default=24_000, ge=2_000, description="evidence packing budget")
    price_in_per_mtok_usd: float = Field(
        default=3.0, ge=0, description="the price of a million input tokens, for the budgets"
    )
    price_out_per_mtok_usd: float = Field(
        default=15.0, ge=0, description="the price of a million output tokens"
    )
    max_tokens_per_incident: int = Field(
        default=200_000, ge=0, description="budget: tokens spent on one incident"
    )
    max_cost_per_incident_usd: float = Field(
        default=2.0, ge=0, description="budget: dollars spent on one incident"
    )
    max_tokens_per_day: int = Field(
        default=2_000_000, ge=0, description="budget: tokens spent in one UTC day"
    )
    max_cost_per_day_usd: float = Field(
        default=20.0, ge=0, description="budget: dollars spent in one UTC day"
    )
    breaker_after_failed_incidents: int = Field(
        default=5, ge=1, description="consecutive failed LLM incidents that open the breaker"
    )
    second_opinion: bool = Field(default=True, description="classify what rules call unknown")


class SandboxConfig(BaseModel):
    """How harness runs are isolated."""

    model_config = ConfigDict(extra="forbid")

    isolation: str = Field(
        default="auto",
        pattern="^(auto|bubblewrap|subprocess)$",
        description="auto: bubblewrap where it works, else a plain subprocess with limits",
    )
    network: bool = Field(default=False, description="let the harness open sockets")
    memory_mb: int = Field(
        default=4096, ge=64, description="the address-space limit of a harness run"
    )
    pg_copy_limit_mb: int = Field(
        default=1024, ge=0,
        description="Postgres: the largest incremental table copied into a sandbox schema "
        "(over all the copies of one run)",
    )  # fmt: skip
    pg_clone_limit_mb: int = Field(
        default=256, ge=0,
        description="Postgres: the largest database copied as an incident's own (new "
        "connections to it wait while Postgres copies it)",
    )  # fmt: skip
    pg_clone: str = Field(
        default="auto", pattern="^(auto|never)$",
        description="Postgres: auto: verify in patchit's own copy of the user's database "
        "(create database ... template) where the role may make one; never: always in sandbox "
        "schemas of the user's database",
    )  # fmt: skip
    pg_role: str | None = Field(
        default=None, max_length=63,
        description="Postgres, without a copy: the LOGIN role candidates' dbt logs in as (USAGE "
        "and SELECT on what is read, granted to the profile's user; its password in "
        "PATCHIT_PG_ROLE_PASSWORD); none: one patchit makes where the profile's user has "
        "CREATEROLE, else no verification on a shared database; the operator's setting",
    )  # fmt: skip
    sf_role: str | None = Field(
        default=None, max_length=255,
        description="Snowflake: the role candidates' dbt runs as (CREATE SCHEMA on the "
        "profile's database, USAGE on its warehouse, SELECT on what is read; nothing it may "
        "write in the user's schemas); none: no verification on Snowflake; the operator's setting",
    )  # fmt: skip
    sf_database: str = Field(
        default="never", pattern="^(auto|never)$",
        description="Snowflake: auto: verify in patchit's own zero-copy clone of the user's "
        "database (create database ... clone) where [sandbox] sf_role may make one; never: "
        "always in sandbox schemas of the user's database",
    )  # fmt: skip
    harness: str | None = Field(
        default=None, description="force a harness by name (dbt, airflow, python, ci, compose)"
    )
    ci_commands: list[str] | None = Field(
        default=None,
        description="the commands the ci harness runs, instead of the workflow's run: steps",
    )


class DeliveryConfig(BaseModel):
    """Where `patchit pr` pushes the fix branch and opens its pull request."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(default=None, pattern="^github$", description="the code host")
    repo: str | None = Field(default=None, description="owner/name on the code host")
    remote: str = Field(default="origin", description="git remote the branch is pushed to")
    api_url: str = Field(
        default="https://api.github.com", description="GitHub Enterprise, or a test server"
    )
    base: str | None = Field(default=None, description="base branch; None: the repo's default")
    timeout_s: float = Field(default=30.0, gt=0, description="one request to the code host")
    mode: str = Field(
        default="supervised",
        pattern="^(supervised|autonomous|threshold)$",
        description="supervised: a human runs `patchit pr`; autonomous: the PR opens after "
        "verification; threshold: autonomous above min_confidence, outside critical_paths",
    )
    min_confidence: float = Field(
        default=0.8, ge=0, le=1, description="threshold mode: the confidence that opens a PR alone"
    )
    critical_paths: list[str] = Field(
        default_factory=list, description="globs: fixes touching them always wait for a human"
    )


class NotifyConfig(BaseModel):
    """A webhook (Slack-compatible JSON) told when an incident ends fixed, escalated, failed,
    needs review or regresses."""

    model_config = ConfigDict(extra="forbid")

    webhook_url: str | None = Field(default=None, description="else PATCHIT_WEBHOOK_URL")
    on: list[str] = Field(
        default_factory=lambda: ["fixed", "escalated", "failed", "needs_review", "regression"],
        description="the endings a message is sent for",
    )
    timeout_s: float = Field(default=10.0, gt=0, description="one delivery's time limit")
    max_tries: int = Field(
        default=5, ge=1, description="deliveries of one message, with exponential backoff"
    )
    max_queue: int = Field(default=1000, ge=1, description="oldest undelivered dropped beyond")


class AirflowConfig(BaseModel):
    """The Airflow API server `patchit track` reads task runs from (Airflow incidents), and how
    the failure callback hands a failed task over. The callback reads `heal`, `api_url`,
    `heal_dag_id` and `trigger_timeout_s` itself, standard library only
    (`patchit.integrations.airflow_trigger`); these fields are their schema and defaults."""

    model_config = ConfigDict(extra="forbid")

    api_url: str | None = Field(
        default=None, description="e.g. http://airflow:8080; else PATCHIT_AIRFLOW_API_URL"
    )
    heal: Literal["spool", "dag"] = Field(
        default="spool",
        description="spool: the callback spools for `patchit worker`; dag: it triggers the "
        "patchit_heal DAG through the Airflow REST API (spooling when that fails); "
        "PATCHIT_AIRFLOW_HEAL overrides",
    )
    heal_dag_id: str = Field(default="patchit_heal", description="the DAG `heal = dag` triggers")
    trigger_timeout_s: float = Field(
        default=3.0,
        gt=0,
        le=30,
        description="how long the callback waits for the trigger (login included), at most 30",
    )
    deploy_lag_s: float = Field(
        default=0.0, ge=0, description="how long a merge takes to reach the DAG folder"
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="one request to the Airflow API server (`patchit track`)"
    )


class PatchitConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    llm: LlmConfig = Field(default_factory=LlmConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    airflow: AirflowConfig = Field(default_factory=AirflowConfig)


def load_config(repo_root: Path | None) -> PatchitConfig:
    """The working tree's `.patchit.toml` alone, checked. Not what a heal obeys: that is the
    operator's settings narrowed by the file at the last good commit (`patchit.policy.settings`)."""
    if repo_root is None:
        return PatchitConfig()
    path = repo_root / ".patchit.toml"
    if not path.is_file():
        return PatchitConfig()
    try:
        return PatchitConfig.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).splitlines()[0]
        raise BadInputError(
            f"{path}: invalid patchit config ({msg}); fix or remove the file"
        ) from exc
    except ValidationError as exc:
        raise BadInputError(
            f"{path}: invalid patchit config: {field_error(exc)}; fix or remove the file"
        ) from exc


_SECRET_KEY = re.compile(r"url|webhook|token|secret|passw|key|dsn|auth", re.IGNORECASE)


def _shown(loc: list[int | str], value: object) -> str:
    """` = <value>` for the error line, or "" for what may be a secret (a URL with its
    password, a webhook, a key): a config error may end up in a CI log."""
    text = repr(value)
    if any(_SECRET_KEY.search(str(part)) for part in loc) or any(
        mark in text for mark in ("://", "@")
    ):
        return ""
    return f" = {text if len(text) <= 60 else text[:57] + '...'}"


def field_error(exc: ValidationError) -> str:
    """The first bad setting, as the file spells it: `[sandbox] pg_clone = 'x': what is
    wrong` (and how many more there are)."""
    errors = exc.errors()
    if not errors:
        return str(exc).splitlines()[0]
    first = errors[0]
    loc, value = list(first.get("loc", ())), first.get("input")
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
    if len(loc) >= 2:
        where = f"[{loc[0]}] {key.lstrip('.')}"
    else:  # a top-level key: a [section] when its value is a table
        where = (f"[{loc[0]}]" if isinstance(value, dict) else str(loc[0])) if loc else "the file"
    shown = "" if first.get("type") in ("missing", "extra_forbidden") else _shown(loc, value)
    if first.get("type") == "extra_forbidden":
        what = "unknown section" if len(loc) == 1 and isinstance(value, dict) else "unknown setting"
    else:
        what = str(first.get("msg", "invalid")).replace("String should match pattern", "must match")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}{shown}: {what}{more}"


class StateConfig(BaseModel):
    """Where the spool and the attempt memory live: SQLite files under `$PATCHIT_HOME`
    (default), or one Postgres database that many workers share."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        default=None,
        description="postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME; PATCHIT_STATE_URL wins",
    )


class WorkerConfig(BaseModel):
    """`patchit worker`'s limits."""

    model_config = ConfigDict(extra="forbid")

    max_crashes: int = Field(
        default=2,
        ge=1,
        description="heals of one incident that died (killed, out of memory, crashed) before "
        "the worker marks it failed instead of resuming it again",
    )


class DeploymentConfig(PatchitConfig):
    """`$PATCHIT_HOME/patchit.toml`: the state, this host's checkout of each repository named
    by its remote URL (`"github.com/acme/dags" = "/srv/dags"`), the worker's limits, and the
    operator's settings: any section of `.patchit.toml`, the only place for those with
    authority (`patchit.policy.settings`)."""

    state: StateConfig = Field(default_factory=StateConfig)
    repos: dict[str, str] = Field(
        default_factory=dict,
        description="this host's checkout of each repository, by remote URL or `bundle:NAME`",
    )
    worker: WorkerConfig = Field(default_factory=WorkerConfig)


def load_deployment(home: Path) -> DeploymentConfig:
    try:  # an unreadable file is a StateUrlError: a BadInputError already
        return DeploymentConfig.model_validate(read_deployment(home))
    except ValidationError as exc:
        raise BadInputError(
            f"{deployment_file(home)}: invalid deployment config: {field_error(exc)}; fix or "
            "remove the file"
        ) from exc
