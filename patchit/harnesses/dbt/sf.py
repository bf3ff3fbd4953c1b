"""The Snowflake sandbox schemas of one dbt harness (`patchit.sandbox.snowflake`): where each
candidate builds, what its `--defer` finds built, the zero-copy clones a selected incremental
model or snapshot builds on (`at(timestamp => <the failing run's start>)` where time travel
reaches it), the database of patchit's own they live in with `[sandbox] sf_database = "auto"`
(`patchit.sandbox.sf_database`), and the isolation line. All of it is dropped when the incident
ends; a killed run's schemas are swept by the next run on the database, by the rules of the
Postgres sandbox schemas (`patchit.sandbox.pg_orphans.judge`).

The same `dbt ls` guard as on Postgres (`patchit.harnesses.dbt.pg.guard_schemas`) runs before
every build: a node that would be built outside the sandbox schema is refused.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.harnesses.dbt.pg import UNVERIFIED, _builds_on_itself, _suffix
from patchit.harnesses.dbt.pg_schemas import deferred_schemas, drop_made, manifest_relations
from patchit.harnesses.dbt.units import DbtSandbox
from patchit.sandbox.pg_orphans import MAX_AGE_S, Verdict, judge
from patchit.sandbox.pg_role import CannotVerifySafely
from patchit.sandbox.sf_database import OwnDatabase, drop_database, make_own_database
from patchit.sandbox.sf_grants import check_sf_role
from patchit.sandbox.snowflake import SfWarehouse, ident, sandbox_schema


@dataclass(frozen=True)
class SfPlaced:
    """Where a candidate's run builds: its sandbox `schema` in the user's database, and the
    relations of the schemas its `--defer` reads."""

    schema: str
    relations: set[str]
    output: dict[str, Any]  # the profile output the run logs in with: the operator's role
    own: OwnDatabase | None = None  # patchit's clone of the user's database, or why not


CANNOT_SF = "cannot verify safely on Snowflake"


def grants(output: dict[str, Any], role: str = "PATCHIT_SANDBOX") -> str:
    """The statements that make a role candidates may run as: it creates (and so owns) its
    sandbox schemas, reads what the project reads, and may write nothing of the user's."""
    database = ident(str(output.get("database") or "<database>"))
    warehouse = ident(str(output.get("warehouse") or "<warehouse>"))
    user = str(output.get("user") or "<user>")
    return (
        f"create role {role}; grant usage on warehouse {warehouse} to role {role}; "
        f"grant usage, create schema on database {database} to role {role}; "
        f"grant usage on all schemas in database {database} to role {role}; "
        f"grant select on all tables in database {database} to role {role}; "
        f"grant select on all views in database {database} to role {role}; "
        f"grant role {role} to user {user}"
    )


def sweep(
    warehouse: SfWarehouse, max_age_s: float = MAX_AGE_S, dry_run: bool = False
) -> list[tuple[Verdict, bool]]:
    """Judge every sandbox schema of the database and drop the dead runs' (not with
    `dry_run`); each verdict with whether its schema was dropped (a failed drop: the verdict's
    `error`, and the sweep goes on). HarnessError when the database cannot be read."""
    done: list[tuple[Verdict, bool]] = []
    for schema, label, now in warehouse.sandboxes():
        verdict = judge(schema, label, now, max_age_s)
        dropped = False
        if verdict.drop and not dry_run and label is not None:
            try:
                dropped = warehouse.drop(schema, if_comment=label)
            except HarnessError as exc:
                verdict = replace(verdict, error=str(exc))
        done.append((verdict, dropped))
    return done


class SfSchemas:
    """The Snowflake sandbox schemas one harness made; close() drops them all."""

    def __init__(self) -> None:
        self._made: list[tuple[SfWarehouse, str, Path]] = []
        self._swept: set[str] = set()
        self.swept: list[str] = []  # schemas of dead runs dropped on the way
        self._problems: list[str] = []
        self._lock = threading.Lock()
        # the operator's `[sandbox] sf_role`; None: candidate SQL would run as the profile's
        # role, which may write the user's schemas (a hook's raw SQL): nothing runs
        self.role: str | None = None
        self._role_checked: dict[str, str] = {}
        self.role_notes: dict[str, str] = {}  # sandbox schema: what its role's check found
        # `[sandbox] sf_database`: "auto", a database of patchit's own where the role may
        # make one (`patchit.sandbox.sf_database`), one per user database while it is used
        self.own_database = "auto"
        self._own: dict[str, tuple[OwnDatabase, SfWarehouse | None]] = {}
        self.own_notes: dict[str, str] = {}  # sandbox schema: where it was made, and why

    def _own_database(self, output: dict[str, Any], manifest: Path | None) -> OwnDatabase:
        """The database of patchit's own the sandboxes of `output`'s database are made in
        (made on first use), or why there is none."""
        key = json.dumps(output, sort_keys=True, default=str)
        with self._lock:
            if key in self._own:
                return self._own[key][0]
            source = str(output.get("database") or "")
            if self.own_database == "never":
                own = OwnDatabase(None, source, "no database of patchit's own "
                                  '([sandbox] sf_database = "never")')  # fmt: skip
                self._own[key] = (own, None)
                return own
            warehouse = SfWarehouse(output, purpose="patchit's own database")
            try:
                own = make_own_database(warehouse, read_schemas(output, manifest))
            except BaseException:
                warehouse.close()
                raise
            self._own[key] = (own, warehouse if own.name else None)
            if own.name is None:
                warehouse.close()
            return own

    def _check_role(self, output: dict[str, Any], role: str) -> str:
        """Once per database: CannotVerifySafely when the role may write the user's data
        (`patchit.sandbox.sf_grants`); else what the isolation line says of its grants."""
        key = json.dumps(output, sort_keys=True, default=str)
        if key not in self._role_checked:
            checker = SfWarehouse(output, purpose="the check of [sandbox] sf_role's grants")
            try:
                self._role_checked[key] = check_sf_role(checker, role)
            finally:
                checker.close()
        return self._role_checked[key]

    def sweep_dead(self, output: dict[str, Any]) -> None:
        """Once per database: drop the sandbox schemas that killed runs left there."""
        key = json.dumps(output, sort_keys=True, default=str)
        if key in self._swept:
            return
        self._swept.add(key)
        warehouse = SfWarehouse(output, purpose="the sweep of dead runs' sandboxes")
        try:
            done = sweep(warehouse)
            self.swept += [v.schema for v, dropped in done if dropped]
            self._problems += [f"sandbox {v.schema} of a dead run was not dropped: {v.error}"
                               for v, _ in done if v.error]  # fmt: skip
        except HarnessError as exc:
            self._problems.append(f"sandboxes of dead runs were not swept: {exc}")
        finally:
            warehouse.close()

    def place(self, output: dict[str, Any], scratch: Path, manifest: Path | None) -> SfPlaced:
        """An empty sandbox schema for the candidate whose scratch dir is `scratch`, and the
        relations of the schemas `--defer` reads. CannotVerifySafely without the operator's
        role: a candidate's hooks would run as the profile's role."""
        if self.role is None:
            raise CannotVerifySafely(
                f"{CANNOT_SF}: candidate SQL (hooks included) would run as the profile's role "
                f"{output.get('role') or '(its default)'}, which may write your schemas; set "
                "[sandbox] sf_role in $PATCHIT_HOME/patchit.toml to a role made with: "
                f"{grants(output)}"
            )
        output = {**output, "role": self.role}
        note = self._check_role(output, self.role)  # before anything runs as the role
        self.sweep_dead(output)
        own = self._own_database(output, manifest)
        read_from = output  # the schemas the failing run's manifest places nodes in
        if own.name is not None:
            output = {**output, "database": own.name}
        schema = sandbox_schema(scratch)
        self.role_notes[schema] = note
        self.own_notes[schema] = own.why
        with self._lock:
            known = [w for w, made, _ in self._made if made == schema]
        warehouse = known[0] if known else SfWarehouse(output)
        try:
            warehouse.reset(schema)
        except BaseException:
            if not known:
                warehouse.close()
            raise
        with self._lock:
            if not known:
                self._made.append((warehouse, schema, scratch.resolve()))
        relations = warehouse.relations(deferred_schemas(read_from, manifest))
        return SfPlaced(schema, relations, output, own)

    def warehouse_of(self, schema: str) -> SfWarehouse:
        return next(warehouse for warehouse, made, _ in self._made if made == schema)

    def release(self, area: Path | None = None) -> list[str]:
        """Drop the schemas made for scratch dirs under `area` (all: None); a line per schema
        that could not be dropped."""
        with self._lock:
            self._made, problems = drop_made(self._made, area)
            in_use = {w.database for w, _, _ in self._made}
            for key, (own, warehouse) in list(self._own.items()):
                if own.name is None or own.name in in_use or warehouse is None:
                    continue
                del self._own[key]  # the next incident gets a fresh clone
                try:
                    left = drop_database(warehouse, own.name)
                except HarnessError as exc:
                    left = f"; database {own.name} not dropped: {exc}"
                finally:
                    warehouse.close()
                if left:
                    problems.append(left.removeprefix("; "))
        return problems

    def close(self) -> list[str]:
        problems = [*self._problems, *self.release()]
        self._problems = []
        return problems


def clone_incrementals(
    box: DbtSandbox,
    nodes: list[dict[str, Any]],
    warehouse: SfWarehouse,
    at_utc: datetime | None = None,
) -> list[str]:
    """Clone (zero-copy) the user's table of every selected incremental model and snapshot
    (`nodes`, as `dbt ls` listed them) to where the sandbox build writes it, so dbt takes the
    incremental branch on the user's rows; the report's lines. `at_utc` (the failing run's
    start) freezes what is cloned: the candidate's and the baseline's runs of the data check
    then build on the same rows, however the table moved meanwhile."""
    assert box.pg_schema is not None
    full_refresh = "--full-refresh" in box.args
    wanted = [n for n in nodes if _builds_on_itself(n, full_refresh)]
    if not wanted:
        return []
    user = manifest_relations(box.state_manifest) if box.state_manifest else {}
    target = str(warehouse.output.get("schema") or "")
    notes: list[str] = []
    for node in wanted:
        name = str(node["unique_id"]).rpartition(".")[2]
        _database, schema, alias = user.get(str(node["unique_id"]), ("", "", ""))
        dest = (str(node.get("schema") or ""), str(node.get("alias") or alias))
        if not schema or not alias or not warehouse.exists(schema, alias):
            why = "the user's database has no table of it"
        elif ident(dest[1]) != ident(alias) or _suffix(
            ident(dest[0]), ident(box.pg_schema)
        ) != _suffix(ident(schema), ident(target)):
            why = f"the candidate moves it from {schema}.{alias}: the user's run would too"
        else:
            try:
                rows, when = warehouse.clone_table(box.pg_schema, (schema, alias),
                                                   (ident(dest[0]), dest[1]), at_utc)  # fmt: skip
            except HarnessError as exc:
                why = f"the clone of {schema}.{alias} failed: {exc}"
            else:
                notes.append(f"{name} built on a zero-copy clone of {schema}.{alias} "
                             f"({rows} rows{', ' + when if when else ''})")  # fmt: skip
                continue
        notes.append(f"{name} built from scratch ({why}): {UNVERIFIED}")
    return notes


def sf_note(box: DbtSandbox, role_note: str = "", own_note: str = "") -> str:
    """What the isolation line adds for a Snowflake run: where it wrote and read, and why;
    `role_note`: what the check of its role's grants found."""
    if box.pg_schema is None:
        return ""
    seeded = "".join(f"; {note}" for note in box.pg_notes)
    upstream = (
        "read live from the user's relations (--defer), nothing copied"
        if "--defer" in box.args
        else "built in the sandbox schema too (no manifest to defer to)"
    )
    where = f"of database {box.sf_database}" if box.sf_database else "of the user's database"
    upstream = upstream.replace("the user's relations", "the clone's relations") if (
        box.sf_database) else upstream  # fmt: skip
    return (
        f"; Snowflake: built in schema {box.pg_schema} {where}, dropped afterwards "
        f"({own_note}); upstream {upstream}{seeded}; run as "
        "the operator's [sandbox] sf_role, which may write only the schemas it made"
        + (f" ({role_note})" if role_note else "")
    )


def sf_outputs(box: DbtSandbox) -> dict[str, str]:
    """What a run's Verification says of where its outputs are: its sandbox schema."""
    if box.pg_schema is None:
        return {}
    return {"sf_schema": box.pg_schema, **({"sf_database": box.sf_database}
                                           if box.sf_database else {})}  # fmt: skip


def read_schemas(output: dict[str, Any], manifest: Path | None) -> list[str] | None:
    """The schemas of the user's database a sandbox build reads: where the failing run's
    manifest places its models, seeds, snapshots and sources, and the target's; None without a
    manifest (the whole upstream is built from the sources, wherever they are)."""
    if manifest is None:
        return None
    found = set(deferred_schemas(output, manifest))
    database = ident(str(output.get("database") or ""))
    try:
        sources = json.loads(manifest.read_bytes()).get("sources") or {}
    except (OSError, ValueError):
        return None
    for node in sources.values() if isinstance(sources, dict) else ():
        if isinstance(node, dict) and ident(str(node.get("database") or database)) == database:
            found.add(str(node.get("schema") or ""))
    return sorted(s for s in found if s)
