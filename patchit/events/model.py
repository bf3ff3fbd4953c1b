"""`UniversalFailureEvent`: one failed unit (a dbt node, an Airflow task, ...), versioned.

An event is redacted as it is built: whatever intake made it (the spool, an event file, the dbt
wrapper), every text in it has passed through `patchit.text.redaction` (secrets masked with the
secret-named environment values of this process, lone surrogates escaped, sizes capped), so
the memory, the reports and the model only ever see the redacted event.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from patchit.errors import BadInputError
from patchit.text.inputs import read_input_json, shown
from patchit.text.redaction import clean_text, environment_secrets, scrub

SCHEMA_VERSION = 1
MAX_EVENT_BYTES = 64 * 1024 * 1024


class FailureSource(StrEnum):
    AIRFLOW = "airflow"
    DBT = "dbt"
    CI = "ci"
    PYTHON = "python"


def _now() -> datetime:
    return datetime.now(UTC)


SECRETS_CONTEXT = "secrets"  # validation context: the secrets to redact (else the environment's)


class Redacted(BaseModel):
    """A model whose input is redacted before it is validated (see the module docstring)."""

    @model_validator(mode="before")
    @classmethod
    def _redact(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        # a caller validating many events reads the environment's secrets once for all
        given = info.context.get(SECRETS_CONTEXT) if isinstance(info.context, dict) else None
        return scrub(data, environment_secrets() if given is None else given)


class DbtInvocation(Redacted):
    """How dbt was run, so a harness can replay it (target, vars, env names)."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="dbt sub-command, e.g. build")
    args: list[str] = Field(default_factory=list, description="the full dbt argument list")
    project_dir: str = Field(description="absolute dbt project directory")
    profiles_dir: str | None = None
    profile: str | None = None
    target: str | None = None
    vars: str | None = Field(default=None, description="the --vars argument, verbatim")
    cwd: str = Field(description="working directory dbt ran in (relative DuckDB paths)")
    env: dict[str, str] = Field(
        default_factory=dict, description="DBT_* variables in force (values redacted if secret)"
    )
    invocation_id: str | None = None
    started_utc: datetime | None = None
    # the verbatim --vars, secrets included: kept in this process only, never serialised
    _raw_vars: str | None = PrivateAttr(default=None)

    def with_raw_vars(self, raw: str | None) -> DbtInvocation:
        self._raw_vars = raw
        return self

    def profiles_yml(self) -> str:
        """The profiles.yml dbt read: the user's --profiles-dir, DBT_PROFILES_DIR, or the
        default."""
        folder = self.profiles_dir or self.env.get("DBT_PROFILES_DIR")
        return f"{folder.rstrip('/')}/profiles.yml" if folder else "~/.dbt/profiles.yml"

    def user_flags(self, *, project: bool = True) -> str:
        """The flags `--project-dir P --profiles-dir D --target T` as the user gave them
        (the project only when it is not where dbt ran), for commands a human re-runs."""
        flags = []
        if project and self.project_dir and self.project_dir != self.cwd:
            flags.append(f"--project-dir {self.project_dir}")
        if self.profiles_dir:
            flags.append(f"--profiles-dir {self.profiles_dir}")
        if self.target:
            flags.append(f"--target {self.target}")
        return "".join(f" {f}" for f in flags)

    def replay_vars(self) -> str | None:
        """--vars for a sandbox re-run: the verbatim value when this process has it."""
        return self._raw_vars if self._raw_vars is not None else self.vars


class RuntimeValue(Redacted):
    """One local of the failing frame as the run saw it: its type and the names it holds.

    Names and type names only (`patchit.intake.frame_locals` decides what is safe to keep):
    never a string, number or date value.
    """

    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="type name: dict, types.SimpleNamespace, pkg.module.Class")
    value: Literal["None", "True", "False"] | None = Field(
        default=None, description="the value itself only when it carries no data"
    )
    size: int | None = Field(default=None, description="len() of a builtin container or str")
    keys: dict[str, str] | None = Field(
        default=None, description="a mapping's string keys -> the type name of each value"
    )
    attrs: dict[str, str] | None = Field(
        default=None, description="an object's attribute names -> the type name of each"
    )
    params: list[str] | None = Field(default=None, description="a function's parameter names")
    inner: dict[str, RuntimeValue] = Field(
        default_factory=dict, description="keys/attributes whose values hold names themselves"
    )
    item: RuntimeValue | None = Field(default=None, description="a list's first element")
    truncated: bool = Field(default=False, description="names were left out by a size cap")
    withheld: int = Field(default=0, description="names not recorded: data or credentials")

    def names(self) -> set[str] | None:
        """Every key, attribute or parameter name, or None when a cap cut the list short."""
        if self.truncated:
            return None
        found = {*(self.keys or {}), *(self.attrs or {}), *(self.params or [])}
        return found if self.keys is not None or self.attrs is not None or self.params else None


class RuntimeFrame(Redacted):
    """The locals of the innermost frame running the repository's code, captured when it failed."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="the frame's file, as on the machine that failed")
    line: int
    function: str
    locals: dict[str, RuntimeValue] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list, description="what was left out and why")


class UniversalFailureEvent(Redacted):
    """One failed unit of work, whatever ran it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_utc: datetime = Field(default_factory=_now)
    source: FailureSource
    pipeline_id: str = Field(description="dbt project name or Airflow dag_id")
    run_id: str | None = Field(default=None, description="dbt invocation id or Airflow run_id")
    unit_id: str = Field(description="dbt unique_id or Airflow task_id")
    unit_path: str | None = Field(
        default=None, description="file of the failing unit, relative to repo_path"
    )
    try_number: int | None = None
    map_index: int | None = None
    logical_date: datetime | None = None
    status: str = Field(default="error", description="error | fail | import_error | ...")
    error_type: str = Field(default="", description="exception class or dbt error kind")
    error_message: str = ""
    traceback: str | None = None
    log_excerpt: str | None = None
    log_location: str | None = None
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="name -> absolute path (run_results, manifest, ...)"
    )
    repo_path: str | None = Field(default=None, description="git root holding the failing code")
    commit: str | None = Field(default=None, description="HEAD of repo_path when it failed")
    repo_url: str | None = Field(
        default=None,
        description="the repository's normalised remote URL (`github.com/acme/dags`), when its "
        "checkout has one: clones at other paths on other hosts share its incidents",
    )
    dbt: DbtInvocation | None = None
    context: dict[str, Any] = Field(default_factory=dict, description="source-specific extras")
    runtime_locals: RuntimeFrame | None = Field(
        default=None,
        description="the failing frame's locals as names and types (no values), when the "
        "runtime captured them (the Airflow callback does)",
    )

    def short(self) -> str:
        return f"{self.source.value}:{self.pipeline_id}:{self.unit_id}"


BUNDLE_PREFIX = "bundle:"  # `[repos]` key and memory name of an Airflow DAG bundle


def bundle_of(event: UniversalFailureEvent) -> str | None:
    """The Airflow DAG bundle the event's task came from, when it names one (a dbt node's
    event made from an Airflow task that ran dbt: that task's bundle)."""
    if event.source is FailureSource.AIRFLOW:
        name = event.context.get("bundle_name")
    else:
        origin = event.context.get("airflow")
        name = origin.get("bundle_name") if isinstance(origin, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def repo_identity(event: UniversalFailureEvent) -> str | None:
    """The event's repository name shared by every host: its remote URL, else
    `bundle:<name>` of its Airflow DAG bundle; None (its local path names it) without either."""
    if event.repo_url:
        return event.repo_url
    bundle = bundle_of(event)
    return f"{BUNDLE_PREFIX}{bundle}" if bundle else None


def event_json_schema() -> dict[str, Any]:
    return UniversalFailureEvent.model_json_schema()


def load_event(path: Path) -> UniversalFailureEvent:
    """Read one event file; any defect is a BadInputError naming the file (a FIFO or a device
    is refused unopened, see `patchit.text.inputs`)."""
    try:
        data = read_input_json(path, MAX_EVENT_BYTES, what="event file")
    except BadInputError as exc:
        raise BadInputError(f"{exc}; pass an event file that conforms to `patchit schema`") from exc
    return validate_event(data, shown(path))


def validate_event(
    data: Any, where: str, secrets: list[str] | None = None
) -> UniversalFailureEvent:
    """An event from parsed JSON; BadInputError naming `where` and the first wrong field.
    `secrets`: what to redact, read once by a caller validating many (else the environment's
    secret-named values, read now)."""
    context = {SECRETS_CONTEXT: secrets} if secrets is not None else None
    try:
        return UniversalFailureEvent.model_validate(data, context=context)
    except ValidationError as exc:
        raise BadInputError(
            f"{where}: does not match the event schema at {schema_error(exc)} "
            "(see `patchit schema`)"
        ) from exc


def schema_error(exc: ValidationError) -> str:
    """`field.path: message` of the first error, one line and short."""
    first = exc.errors()[0]
    loc = ".".join(clean_text(str(p))[:80] for p in first["loc"]) or "<root>"
    return f"{loc}: {' '.join(str(first['msg']).split())[:300]}"
