"""`patchit doctor`'s check of the dbt target: where a candidate would be verified.

For the repository's dbt project (its `dbt_project.yml` at the root or one directory down) and
the target dbt would use: DuckDB is copied per incident; Postgres is reached with the profile's
credentials (5 s), patchit's role must be able to create its sandbox schemas (`CREATE` on the
database), and the line says whether an incident would get a database of its own
(`patchit.sandbox.pg_clone`) or why not, and which role candidates would run as, in a copy or
not (`patchit.sandbox.pg_role`: the operator's `pg_role`, checked now; one made per heal; or
none, and such an incident is escalated: from a copy the profile's user still reaches the
server); Snowflake is reached with the profile's credentials (`patchit.doctor.snowflake`);
other warehouses are not verified in a sandbox. Nothing is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from patchit.config import SandboxConfig
from patchit.doctor.doctor import Check
from patchit.errors import PatchitError

if TYPE_CHECKING:
    from patchit.sandbox.postgres import PgWarehouse

NAME = "dbt target"
Status = Literal["ok", "warn", "fail"]


def find_project(repo: Path) -> Path | None:
    """The repository's dbt project dir: the root, else the one directory below it that has a
    `dbt_project.yml` (None for none, or several)."""
    if (repo / "dbt_project.yml").is_file():
        return repo
    found = sorted(p.parent for p in repo.glob("*/dbt_project.yml"))
    return found[0] if len(found) == 1 else None


def check_warehouse(repo: Path, config: SandboxConfig) -> list[Check]:
    project = find_project(repo)
    if project is None:
        return []  # not a dbt repository (or one whose project patchit cannot guess)
    from patchit.sandbox.dbt_profile import project_target

    try:
        target = project_target(project, "doctor", cwd=project)
    except PatchitError as exc:
        return [Check("fail", NAME, str(exc), "fix the profile, or pass its dir as dbt would")]
    kind = str(target.output.get("type") or "?")
    where = f"{target.profile}.{target.target} ({kind})"
    if kind == "duckdb":
        return [Check("ok", NAME, f"{where}: {_duckdb(target.db_path, project)}")]
    if kind == "snowflake":
        from patchit.doctor.snowflake import check_snowflake

        return [check_snowflake(where, target.output, config.sf_role, config.sf_database)]
    if kind != "postgres":
        return [Check("warn", NAME, f"{where}: not verified in a sandbox; a code bug's fix-it "
                      "suggestion is reported, unverified",
                      "see docs/how-to/warehouses.md")]  # fmt: skip
    return [_postgres(where, target.output, config)]


def _duckdb(path: Path | None, project: Path) -> str:
    """Where the file is and how a candidate gets its copy: a path under the project (even
    under dbt's target folder, which the sandbox moves) is the same path in the candidate's
    worktree, as the user's run resolves it."""
    if path is None:
        return "in memory: each run starts empty"
    inside = path.is_relative_to(project.resolve())
    where = " (the same path in each candidate's worktree)" if inside else ""
    if not path.is_file():
        return (f"{path} does not exist yet (a first dbt run makes it); until then a "
                f"candidate builds a fresh one of its own{where}")  # fmt: skip
    return f"{path}, copied for each incident{where}"


def _postgres(where: str, output: dict[str, object], config: SandboxConfig) -> Check:
    from patchit.sandbox.pg_clone import clone_plan
    from patchit.sandbox.postgres import PgWarehouse, dbname_of

    warehouse = PgWarehouse({**output, "connect_timeout": 5}, purpose="patchit doctor")
    try:
        [(may_create,)] = warehouse.query(
            "select has_database_privilege(current_database(), 'CREATE')"
        )
        db = dbname_of(output)
        if not may_create:
            return Check("fail", NAME, f"{where}: the role cannot create patchit's sandbox "
                         f"schemas in database {db}", f"grant create on database {db} to the "
                         "profile's role")  # fmt: skip
        status, shared, fix = _shared_mode(warehouse, config)
    except PatchitError as exc:
        return Check("fail", NAME, f"{where}: {exc}", "check the profile and the server")
    finally:
        warehouse.close()
    if config.pg_clone == "never":
        return Check(status, NAME, f'{where}: no copy ([sandbox] pg_clone = "never"): {shared}',
                     fix)  # fmt: skip
    why = clone_plan(dict(output), config.pg_clone_limit_mb * 2**20)
    if not why and status != "ok":  # the copy is no boundary for the profile's own role
        return Check(status, NAME, f"{where}: a copy of database {db} could be made, but {shared}"
                     "; in a copy too (the profile's user reaches beyond it)", fix)  # fmt: skip
    if not why:
        copy = (f"{where}: verified in a copy of database {db} made for each incident (a "
                "database of patchit's own: candidate SQL writes only the copy)")  # fmt: skip
        return Check("ok", NAME, f"{copy}; while other sessions are on {db}: {shared}", fix)
    return Check(status, NAME, f"{where}: no copy of it now: {why}; {shared}", fix)


def _shared_mode(warehouse: PgWarehouse, config: SandboxConfig) -> tuple[Status, str, str]:
    """How a candidate runs in sandbox schemas of the user's database: as the operator's
    `pg_role` (checked now), as a role made per heal (the profile's user has CREATEROLE), or
    not at all (escalated); the check's status, its line and what to do."""
    from patchit.sandbox.pg_role import (
        CannotVerifySafely,
        check_role,
        grant_statements,
        may_create_roles,
    )

    only = "which can write only its sandbox schemas"
    if config.pg_role:
        try:
            check_role(warehouse, config.pg_role, made=False)
        except CannotVerifySafely as exc:
            return "fail", str(exc), "fix the role, or unset [sandbox] pg_role"
        role = config.pg_role
        return "ok", f"verified in sandbox schemas as role {role} ([sandbox] pg_role), {only}", ""
    if may_create_roles(warehouse):
        return ("ok", "verified in sandbox schemas as a role patchit makes for each heal (the "
                f"profile's user has CREATEROLE), {only}", "")  # fmt: skip
    schemas = [str(warehouse.output.get("schema") or "public")]
    return (
        "warn",
        "not verified: cannot verify safely on a shared database (no [sandbox] pg_role, and "
        "the profile's user may not create roles): such an incident is escalated",
        grant_statements(warehouse.output, schemas),
    )
