"""The user's dbt target, found the way dbt finds it, and a sandbox profile pointing at a copy.

Resolution follows dbt: profiles dir from `--profiles-dir`, else `DBT_PROFILES_DIR`, else the
project dir when it holds a profiles.yml, else `~/.dbt`; profile name from `--profile`, else
`profile:` in dbt_project.yml; target from `--target`, else the profile's `target:`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.sandbox import snowflake
from patchit.sandbox.postgres import is_postgres, sandbox_output
from patchit.text.dbt_args import option_value
from patchit.text.inputs import parsed_once

_MISSING = object()


@dataclass(frozen=True)
class DbtTarget:
    """One resolved profile output; `db_path` is the absolute DuckDB file (None: in memory)."""

    profile: str
    target: str
    output: dict[str, Any]
    db_path: Path | None
    profiles_file: Path | None = None


def _load_yaml(path: Path) -> Any:
    return parsed_once(path, _parse_yaml_text, "dbt_profile.yaml", _parse_yaml)


def _parse_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror}); check the path") from exc
    return _parse_yaml_text(path, text)


def _parse_yaml_text(path: Path, text: str) -> Any:
    try:
        return YAML(typ="safe").load(text)
    except YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInputError(f"{path}: not valid YAML ({first}); fix the file") from exc


def _render_env_vars(value: Any, env: dict[str, str], where: Path) -> Any:
    """Render `{{ env_var('X', 'default') }}` (and dbt's as_* filters) in every string."""
    if isinstance(value, dict):
        return {k: _render_env_vars(v, env, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_env_vars(v, env, where) for v in value]
    if not isinstance(value, str) or "{{" not in value:
        return value

    def env_var(name: str, default: Any = _MISSING) -> Any:
        if name in env:
            return env[name]
        if default is _MISSING:
            raise BadInputError(
                f"{where}: env_var('{name}') is not set and has no default; set {name}"
            )
        return default

    jenv = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    jenv.globals["env_var"] = env_var
    jenv.filters.update(
        as_text=str, as_number=lambda v: float(v) if "." in str(v) else int(v),
        as_bool=lambda v: str(v).strip().lower() in ("true", "1", "yes"), as_native=lambda v: v,
    )  # fmt: skip
    try:
        rendered = jenv.from_string(value).render()
    except jinja2.TemplateError as exc:
        raise BadInputError(f"{where}: cannot render {value!r} ({exc}); fix the profile") from exc
    # A rendered number or boolean is written back as YAML would have typed it.
    if rendered.isdigit():
        return int(rendered)
    if rendered.lower() in ("true", "false"):
        return rendered.lower() == "true"
    return rendered


def resolve_profiles_dir(event: UniversalFailureEvent, project_dir: Path) -> Path:
    dbt = event.dbt
    assert dbt is not None
    cwd = Path(dbt.cwd)
    if dbt.profiles_dir:
        return (cwd / Path(dbt.profiles_dir).expanduser()).resolve()
    from_env = dbt.env.get("DBT_PROFILES_DIR")
    if from_env:
        return (cwd / Path(from_env).expanduser()).resolve()
    if (project_dir / "profiles.yml").is_file():
        return project_dir
    return Path.home() / ".dbt"


def project_target(
    project: Path,
    command: str,
    profiles_dir: Path | None = None,
    target: str | None = None,
    cwd: Path | None = None,
) -> DbtTarget:
    """The profile output dbt would use for `project`, run from `cwd` (default: this one): a
    command of patchit's own on a project, not a failed run (`patchit doctor`, `patchit
    sandbox clean`)."""
    from patchit.events.model import DbtInvocation, FailureSource

    invocation = DbtInvocation(
        command=command,
        project_dir=str(project),
        profiles_dir=str(profiles_dir.resolve()) if profiles_dir else None,
        target=target,
        cwd=str(cwd or Path.cwd()),
    )
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id=project.name, unit_id="-", dbt=invocation
    )
    return resolve_dbt_target(event)


def resolve_dbt_target(event: UniversalFailureEvent, project_dir: Path | None = None) -> DbtTarget:
    """The profile output the failing run used. `project_dir` overrides event.dbt.project_dir
    (e.g. the same project inside a worktree); env_var() sees os.environ plus event.dbt.env."""
    if event.dbt is None:
        raise BadInputError(f"event {event.event_id} has no dbt invocation; it is not a dbt event")
    dbt = event.dbt
    project_dir = (project_dir or Path(dbt.project_dir)).resolve()
    env = {**os.environ, **dbt.env}

    profile_name = dbt.profile
    if not profile_name:
        project_file = project_dir / "dbt_project.yml"
        project = _load_yaml(project_file)
        profile_name = project.get("profile") if isinstance(project, dict) else None
        if not isinstance(profile_name, str) or not profile_name:
            raise BadInputError(f"{project_file}: no `profile:` key; add one or pass --profile")

    profiles_file = resolve_profiles_dir(event, project_dir) / "profiles.yml"
    if not profiles_file.is_file():
        raise BadInputError(f"{profiles_file}: no profiles.yml there; pass --profiles-dir")
    profiles = _load_yaml(profiles_file)
    profile = profiles.get(profile_name) if isinstance(profiles, dict) else None
    if not isinstance(profile, dict):
        raise BadInputError(f"{profiles_file}: no profile named {profile_name!r}; add it")
    target_name = dbt.target or _render_env_vars(profile.get("target"), env, profiles_file)
    if not isinstance(target_name, str) or not target_name:
        raise BadInputError(f"{profiles_file}: profile {profile_name!r} has no `target:`")
    outputs = profile.get("outputs")
    raw_output = outputs.get(target_name) if isinstance(outputs, dict) else None
    if not isinstance(raw_output, dict):
        raise BadInputError(
            f"{profiles_file}: profile {profile_name!r} has no output {target_name!r}; add it"
        )
    output = _render_env_vars(raw_output, env, profiles_file)
    return DbtTarget(
        profile=profile_name,
        target=target_name,
        output=output,
        db_path=_duckdb_file(output, Path(dbt.cwd), profiles_file),
        profiles_file=profiles_file,
    )


def user_target_dir(event: UniversalFailureEvent) -> Path:
    """The target dir the user's run wrote to: `--target-path`, else `DBT_TARGET_PATH`, else
    `target-path:` in dbt_project.yml, else `target`; relative to the project dir, as dbt."""
    assert event.dbt is not None
    project_dir = Path(event.dbt.project_dir)
    chosen = option_value(event.dbt.args, "--target-path") or event.dbt.env.get("DBT_TARGET_PATH")
    if not chosen:
        try:
            project = _load_yaml(project_dir / "dbt_project.yml")
        except BadInputError:
            project = None
        configured = project.get("target-path") if isinstance(project, dict) else None
        chosen = configured if isinstance(configured, str) and configured else "target"
    return (project_dir / chosen).resolve()


def _duckdb_file(output: dict[str, Any], cwd: Path, where: Path) -> Path | None:
    if output.get("type") != "duckdb":
        return None
    path = str(output.get("path") or ":memory:")
    if path == ":memory:" or path.startswith(":memory:"):
        return None
    if path.startswith("md:") or path.startswith("motherduck:") or "://" in path:
        raise BadInputError(
            f"{where}: DuckDB path {path!r} is remote; patchit can only sandbox a local file"
        )
    return (cwd / Path(path).expanduser()).resolve()


def sandbox_db_location(target: DbtTarget, cwd: Path, root: Path) -> tuple[Path, str]:
    """Where a candidate's DuckDB copy goes and the `path:` that reaches it from `cwd`.

    The user's own relative `path:` is kept verbatim when, taken from `cwd` (the failing run's
    cwd re-rooted in the worktree), it stays inside the worktree `root`: then relative file
    reads in models resolve as in the user's run, dbt's profile hash equals the user's (so
    their partial-parse state is valid in the sandbox) and is the same for every candidate.
    Any other path (absolute, `~`, escaping the worktree) becomes `.patchit/<file name>`.
    """
    if target.db_path is None:
        raise BadInputError(f"target {target.target!r} has no DuckDB file to place")
    raw = str(target.output.get("path") or "")
    name = target.db_path.name
    relative = Path(raw)
    if raw and not relative.is_absolute() and not raw.startswith("~"):
        location = (cwd / relative).resolve()
        try:
            location.relative_to(root.resolve())
        except ValueError:
            pass
        else:
            if location.name == name:
                return location, raw
    return (cwd / ".patchit" / name).resolve(), f".patchit/{name}"


# The warehouses whose dbt sandbox patchit can build (docs/how-to/warehouses.md has the plan for
# the rest)
SANDBOX_TYPES = ("duckdb", "postgres", "snowflake")
_NAMES = {"postgres": "Postgres", "snowflake": "Snowflake", "bigquery": "BigQuery",
          "databricks": "Databricks", "redshift": "Redshift"}  # fmt: skip


def unsupported_sandbox(target: DbtTarget) -> str | None:
    """One line naming the profile and target when patchit cannot verify a fix on their
    warehouse (None for DuckDB, Postgres and Snowflake)."""
    kind = str(target.output.get("type") or "unknown")
    if kind in SANDBOX_TYPES:
        return None
    where = f" in {target.profiles_file}" if target.profiles_file else ""
    name = _NAMES.get(kind, kind)
    return (
        f"profile {target.profile!r}, target {target.target!r}{where} is a {kind} warehouse: "
        f"{name} sandboxes are not supported yet (DuckDB, Postgres and Snowflake only, see "
        "docs/how-to/warehouses.md), so no "
        "fix can be verified"
    )


def write_sandbox_profile(
    target: DbtTarget,
    db_copy: Path,
    dest_dir: Path,
    path_text: str | None = None,
    schema: str | None = None,
) -> Path:
    """Write `dest_dir/profiles.yml`: the same profile and target names and settings, with
    `path:` replaced by `path_text` (relative to the sandbox run's cwd), or by the absolute
    copy; on Postgres and Snowflake, `schema:` replaced by the sandbox `schema` and the password
    read from the environment. Only this one target is written, so nothing in the sandbox can
    reach the user's other outputs."""
    if (unsupported := unsupported_sandbox(target)) is not None:
        raise BadInputError(unsupported)
    output = dict(target.output)
    if is_postgres(output):
        if schema is None:
            raise BadInputError("a Postgres sandbox profile needs its sandbox schema")
        output = sandbox_output(output, schema)
    elif snowflake.is_snowflake(output):
        if schema is None:
            raise BadInputError("a Snowflake sandbox profile needs its sandbox schema")
        output = snowflake.sandbox_output(output, schema)
    elif target.db_path is not None:
        output["path"] = path_text if path_text is not None else str(db_copy.resolve())
    dest_dir.mkdir(parents=True, exist_ok=True)
    profiles = {target.profile: {"target": target.target, "outputs": {target.target: output}}}
    dest = dest_dir / "profiles.yml"
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    with dest.open("w", encoding="utf-8") as fh:
        yaml.dump(profiles, fh)
    return dest
